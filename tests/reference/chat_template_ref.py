#!/usr/bin/env python3
"""Regenerates tests/data/chat_templates/: the ids and assistant-token masks that Hugging Face's
`apply_chat_template` gives for a set of conversations, for the engine's built-in llama3 and chatml
renderers to match (tests/core/data/test_chat_sft.cpp, "chat templates equal apply_chat_template").

The templates below are written here in the models' published form (Meta's Llama 3 template with its
`| trim`, and ChatML as Qwen/SmolLM ship it without a default system prompt), with `{% generation %}`
marks around what the engine trains (the assistant's content and its end-of-turn token), so
`return_assistant_tokens_mask` gives transformers' own mask rule to compare with.

Tokenizers: tests/data/hf_tokenizer/llama3_style.tokenizer.json (has the Llama 3 specials), a
chatml_style copy of it with <|im_start|>/<|im_end|> added as special tokens (written here), and
tests/data/hf_tokenizer/qwen2_nfc.tokenizer.json (Qwen2's layout with its NFC normalizer; its
conversations add decomposed accents, which NFC composes, to the contents).

Run with torch-free transformers + tokenizers installed:
    python tests/reference/chat_template_ref.py
"""
import json
import os
import sys

from tokenizers import AddedToken, Tokenizer
from transformers import PreTrainedTokenizerFast
import transformers

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
OUT = os.path.join(ROOT, "tests", "data", "chat_templates")

LLAMA3 = (
    "{% for message in messages %}"
    "{% if loop.index0 == 0 %}{{ bos_token }}{% endif %}"
    "{{ '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] | trim }}<|eot_id|>{% endgeneration %}"
    "{% else %}{{ message['content'] | trim }}<|eot_id|>{% endif %}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)

CHATML = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' }}"
    "{% if message['role'] == 'assistant' %}"
    "{% generation %}{{ message['content'] }}<|im_end|>{% endgeneration %}"
    "{% else %}{{ message['content'] }}<|im_end|>{% endif %}"
    "{{ '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)

CONVERSATIONS = [
    [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello there."}],
    [
        {"role": "system", "content": "You answer briefly."},
        {"role": "user", "content": "What is the byte tokenizer?"},
        {"role": "assistant", "content": "It maps each byte to one id."},
    ],
    # Contents that start or end with new lines and spaces: jointly tokenized with the header's
    # "\n\n" they merge into other tokens than on their own; llama3 trims them.
    [{"role": "user", "content": "\nList two things:\n"}, {"role": "assistant", "content": "\n- one\n- two\n\n"}],
    [{"role": "user", "content": "  spaced  "}, {"role": "assistant", "content": "   indented answer"}],
    # Multi-turn, non-ASCII.
    [
        {"role": "user", "content": "Où est la gare ?"},
        {"role": "assistant", "content": "À gauche, 200 m."},
        {"role": "user", "content": "Danke! 日本語は？"},
        {"role": "assistant", "content": "はい、少し。"},
    ],
]


NFD_CONVERSATIONS = CONVERSATIONS + [
    [{"role": "user", "content": "Cafe\u0301 cre\u0300me?"}, {"role": "assistant", "content": "\nOui, cafe\u0301."}],
]


def load(name, extra_specials=(), source="llama3_style"):
    tok = Tokenizer.from_file(os.path.join(ROOT, "tests", "data", "hf_tokenizer", source + ".tokenizer.json"))
    if extra_specials:
        tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in extra_specials])
        tok.save(os.path.join(OUT, name + ".tokenizer.json"), pretty=False)
    if source != "llama3_style":
        return PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<|endoftext|>")
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|begin_of_text|>", eos_token="<|end_of_text|>")


def main():
    os.makedirs(OUT, exist_ok=True)
    cases = {"llama3": (load("llama3_style"), LLAMA3, "llama3", "tests/data/hf_tokenizer/llama3_style.tokenizer.json",
                        CONVERSATIONS),
             "chatml": (load("chatml_style", ("<|im_start|>", "<|im_end|>")), CHATML, "chatml",
                        "tests/data/chat_templates/chatml_style.tokenizer.json", CONVERSATIONS),
             "chatml_qwen2_nfc": (load(None, source="qwen2_nfc"), CHATML, "chatml",
                                  "tests/data/hf_tokenizer/qwen2_nfc.tokenizer.json", NFD_CONVERSATIONS)}
    for name, (tok, jinja, template, tokenizer_path, conversations) in cases.items():
        records = []
        for conv in conversations:
            enc = tok.apply_chat_template(conv, chat_template=jinja, tokenize=True, return_dict=True,
                                          return_assistant_tokens_mask=True)
            prompt = tok.apply_chat_template(conv[:-1], chat_template=jinja, tokenize=True, return_dict=True,
                                             add_generation_prompt=True)
            records.append({"messages": conv, "ids": list(enc["input_ids"]),
                            "mask": list(enc["assistant_masks"]), "prompt_ids": list(prompt["input_ids"])})
        with open(os.path.join(OUT, name + ".expected.json"), "w") as f:
            json.dump({"transformers": transformers.__version__, "template": template, "tokenizer": tokenizer_path,
                       "conversations": records}, f, ensure_ascii=False, separators=(",", ":"))
        print(name, len(records), "conversations")


if __name__ == "__main__":
    sys.exit(main())

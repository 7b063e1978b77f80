-- A Lua recipe composing a preset: GPT-3 345M trained on a blend of two tokenized corpora on 8 GPUs
-- (tensor parallel 2 × data parallel 4). Tokenize the corpora into data/wiki_text.{bin,idx} and
-- data/code_text.{bin,idx} with `recipe data prepare` (GPT-2 BPE, the vocab and merges named
-- below), then
--   recipe pretrain examples/wiki.lua
--   recipe pretrain examples/wiki.lua trainer.max_steps=200 parallelism.tp=1
local base = preset "gpt3_345m"

local steps = 20000

return base {
  data = {
    kind = "indexed",
    fixed_batch = false,
    blend = { 0.7, "data/wiki_text", 0.3, "data/code_text" },
    split = "98,2,0",
    tokenizer = "gpt2_bpe",
    vocab_file = "data/gpt2-vocab.json",
    merges_file = "data/gpt2-merges.txt",
  },
  optimizer = { lr = 3e-4, min_lr = 3e-5 },
  schedule = { warmup_steps = steps // 100, decay_style = "cosine" },
  trainer = {
    max_steps = steps,
    micro_batch_size = 8,
    global_batch_size = 256,
    eval_interval = 1000,
    eval_iters = 20,
  },
  parallelism = { tp = 2 },
  checkpoint = { save_interval = 2000, keep_last = 3 },
  executor = { nodes = 1, gpus_per_node = 8 },
  experiment = { name = "wiki" },
}

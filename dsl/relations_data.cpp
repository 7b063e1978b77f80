// Rules of the data section: dataset paths, chat template, tokenizer files (part of
// check_relations).
#include <string>

#include "dsl/check_require.hpp"
#include "dsl/relations.hpp"

namespace recipe::dsl::detail {

void check_data(ResolveContext& ctx) {
  const plan::Plan& p = ctx.plan();
  const plan::ModelConfig& m = p.model;
  // Data.
  const plan::DataConfig& d = p.data;
  if (!d.path.empty() && d.blend.size() >= 1 && !(d.blend.size() == 1 && d.blend.front().second == d.path))
    ctx.violation("data.path", "data.path=\"" + d.path + "\" and data.blend are both set",
                  "set data.path for one dataset, or data.blend for several, not both");
  if ((d.kind == plan::DataKind::indexed || d.kind == plan::DataKind::sft) && d.blend.empty())
    ctx.violation("data.path", "data.kind=" + std::string(plan::to_string(d.kind)) + " needs data.path or data.blend",
                  "set data.path to a dataset prefix (the .bin/.idx pair without extension), or data.blend");
  if (d.kind == plan::DataKind::sft && d.chat_template == plan::ChatTemplate::none)
    ctx.violation("data.chat_template",
                  "data.kind=sft needs data.chat_template, the template the dataset was prepared with",
                  "set data.chat_template to llama3, chatml or plain (as given to `recipe data prepare --format chat "
                  "--chat-template ...`)");
  if (d.kind == plan::DataKind::mock && !d.blend.empty())
    ctx.warn("data.kind=mock ignores data.path/data.blend; set data.kind=\"indexed\" to train on them");
  if (d.tokenizer == plan::Tokenizer::gpt2_bpe) {
    if (d.vocab_file.empty())
      ctx.violation("data.vocab_file", "data.tokenizer=gpt2_bpe needs data.vocab_file (vocab.json)",
                    "set data.vocab_file and data.merges_file");
    if (d.merges_file.empty())
      ctx.violation("data.merges_file", "data.tokenizer=gpt2_bpe needs data.merges_file (merges.txt)",
                    "set data.vocab_file and data.merges_file");
  }
  if (d.tokenizer == plan::Tokenizer::sentencepiece && d.tokenizer_model.empty())
    ctx.violation("data.tokenizer_model", "data.tokenizer=sentencepiece needs data.tokenizer_model (the .model file)",
                  "set data.tokenizer_model");
  if (d.tokenizer == plan::Tokenizer::hf && d.tokenizer_model.empty())
    ctx.violation("data.tokenizer_model", "data.tokenizer=hf needs data.tokenizer_model (the tokenizer.json)",
                  "set data.tokenizer_model to the model's tokenizer.json");
  if (d.tokenizer != plan::Tokenizer::hf && !d.eod_token.empty())
    ctx.violation("data.eod_token", "data.eod_token=\"" + d.eod_token + "\" is only read by data.tokenizer=hf",
                  "remove data.eod_token, or set data.tokenizer=\"hf\"");
  if (d.tokenizer == plan::Tokenizer::byte && m.vocab_size < 256)
    require(ctx, "model.vocab_size", m.vocab_size, false, "is smaller than the 256 ids of the byte tokenizer",
            "set vocab_size ≥ 256");
}

}  // namespace recipe::dsl::detail

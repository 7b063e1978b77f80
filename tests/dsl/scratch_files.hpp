// The data, tokenizer and checkpoint files that resolver tests name by relative path (the resolver
// checks them: dsl/resolve_files.cpp), in a scratch directory that is the working directory while
// a ScratchFiles lives. Datasets are written by the core's writer, so they are real MMIDIDX files.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "core/data/indexed_dataset.hpp"
#include "temp_recipes.hpp"

namespace recipe::dsl::test {

class ScratchFiles {
 public:
  ScratchFiles() : old_(std::filesystem::current_path()) {
    for (const char* prefix :
         {"data/wiki_text", "data/code_text", "data/wiki", "data/code", "data/wiki \"text\"", "a", "b", "d/x"})
      dataset(prefix);
    write("v.json", R"({"a": 0, "b": 1})");
    write("m.txt", "#version: 0.2\na b\n");
    write("t.model", std::string("\x0a\x05\x0a\x01x", 5));  // protobuf bytes, as a SentencePiece .model starts
    write("tok.model", std::string("\x0a\x05\x0a\x01x", 5));
    write("tokenizer.json", R"({"model": {"type": "BPE"}})");
    write("t.json", R"({"model": {"type": "BPE"}})");
    write("runs/base/checkpoints/step-1/metadata.json", "{}");
    std::filesystem::current_path(dir_.dir());
  }
  ~ScratchFiles() { std::filesystem::current_path(old_); }
  ScratchFiles(const ScratchFiles&) = delete;
  ScratchFiles& operator=(const ScratchFiles&) = delete;

  // A dataset of 100 documents of 200 byte tokens (2 samples of Llama 3's 8192 tokens for training) at <dir>/<prefix>.{bin,idx}; returns its full prefix.
  std::string dataset(const std::string& prefix) const {
    const std::filesystem::path p = std::filesystem::path(dir_.dir()) / prefix;
    std::filesystem::create_directories(p.parent_path());
    recipe::data::IndexedDatasetWriter w(p.string() + ".bin", p.string() + ".idx", recipe::data::TokenDType::uint16);
    const std::vector<int32_t> doc(200, 65);
    for (int d = 0; d < 100; ++d) w.add_document(doc);
    w.finish();
    return p.string();
  }
  std::string write(const std::string& name, const std::string& text) const { return dir_.write(name, text); }
  // The absolute form the resolver gives a relative path.
  std::string abs(const std::string& rel) const {
    return (std::filesystem::canonical(dir_.dir()) / rel).lexically_normal().string();
  }

 private:
  TempRecipes dir_;
  std::filesystem::path old_;
};

}  // namespace recipe::dsl::test

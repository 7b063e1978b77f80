// Sample rows → model inputs and targets, checked against the vocabulary (see token_rows.hpp).
#include "core/model/token_rows.hpp"

#include <cstddef>
#include <stdexcept>
#include <string>

namespace recipe::core {

void split_token_rows(const int32_t* rows, int B, int T, int vocab, int32_t* inputs, int32_t* targets) {
  for (int b = 0; b < B; ++b) {
    const int32_t* row = rows + size_t(b) * size_t(T + 1);
    for (int t = 0; t <= T; ++t) {
      if (row[t] < 0 || row[t] >= vocab)
        throw std::runtime_error("token id " + std::to_string(row[t]) + " (sample row " + std::to_string(b) +
                                 ", position " + std::to_string(t) +
                                 ") is outside model.vocab_size=" + std::to_string(vocab) +
                                 "; the data was tokenized with a different vocabulary than the "
                                 "model's (check data.tokenizer and model.vocab_size)");
    }
    for (int t = 0; t < T; ++t) {
      inputs[size_t(b) * T + t] = row[t];
      targets[size_t(b) * T + t] = row[t + 1];
    }
  }
}

void check_split_tokens(const int32_t* inputs, const int32_t* targets, int B, int T, int vocab) {
  for (size_t i = 0; i < size_t(B) * size_t(T); ++i) {
    const bool input_bad = inputs[i] < 0 || inputs[i] >= vocab;
    if (input_bad || targets[i] < -1 || targets[i] >= vocab)
      throw std::runtime_error(std::string(input_bad ? "input" : "target") + " token id " +
                               std::to_string(input_bad ? inputs[i] : targets[i]) + " (sample row " +
                               std::to_string(i / size_t(T)) + ", position " + std::to_string(i % size_t(T)) +
                               ") is outside model.vocab_size=" + std::to_string(vocab) +
                               "; the data was tokenized with a different vocabulary than the model's (check "
                               "data.tokenizer and model.vocab_size)");
  }
}

void check_sample_positions(const int32_t* positions, int B, int T, int max_samples) {
  for (size_t b = 0; b < size_t(B); ++b) {
    int samples = 0;
    for (size_t t = 0; t < size_t(T); ++t) {
      const int32_t v = positions[b * size_t(T) + t];
      if (v != 0 && (t == 0 || v != positions[b * size_t(T) + t - 1] + 1))
        throw std::runtime_error("sample position " + std::to_string(v) + " (sample row " + std::to_string(b) +
                                 ", position " + std::to_string(t) +
                                 ") neither starts a sample (0) nor continues the one before it");
      samples += v == 0;
    }
    if (max_samples > 0 && samples > max_samples)
      throw std::runtime_error("sample row " + std::to_string(b) + " holds " + std::to_string(samples) +
                               " samples (padding counted as one), more than the " + std::to_string(max_samples) +
                               " the model was built for (data.max_samples_per_pack + 1)");
  }
}

}  // namespace recipe::core

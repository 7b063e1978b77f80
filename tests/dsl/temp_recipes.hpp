// Test helpers for the recipe-loading tests (tests/dsl/): a scratch folder of recipe files and scoped environment changes.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>

#include <doctest/doctest.h>

#include "dsl/dsl.hpp"

namespace recipe::dsl::test {

class TempRecipes {
 public:
  TempRecipes() {
    std::string pattern = (std::filesystem::temp_directory_path() / "recipe_dsl_load_XXXXXX").string();
    REQUIRE(::mkdtemp(pattern.data()) != nullptr);
    dir_ = pattern;
  }
  ~TempRecipes() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  TempRecipes(const TempRecipes&) = delete;
  TempRecipes& operator=(const TempRecipes&) = delete;

  // Writes `text` to <dir>/<name> (creating subfolders) and returns the full path.
  std::string write(const std::string& name, const std::string& text) const {
    std::filesystem::path p = dir_ / name;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string dir() const { return dir_.string(); }

 private:
  std::filesystem::path dir_;
};

class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::optional<std::string>& value) : name_(std::move(name)) {
    if (const char* old = std::getenv(name_.c_str())) old_ = old;
    if (value)
      ::setenv(name_.c_str(), value->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

// The message of the RecipeError `fn` throws; fails the test if it throws nothing or anything else.
template <class Fn>
std::string recipe_error_of(Fn&& fn) {
  try {
    fn();
  } catch (const RecipeError& e) {
    return e.what();
  } catch (const std::exception& e) {
    FAIL("expected RecipeError, got std::exception: " << e.what());
    return {};
  }
  FAIL("expected RecipeError, nothing was thrown");
  return {};
}

inline std::string source_dir() { return RECIPE_SOURCE_DIR; }

}  // namespace recipe::dsl::test

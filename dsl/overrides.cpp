// Command-line overrides: `a.b.c=v`, `a.b+=v`, `-=`, `*=`, `/=`, applied to a loaded config tree.
#include <algorithm>
#include <charconv>
#include <cctype>
#include <cmath>
#include <limits>
#include <optional>

#include "dsl/dsl.hpp"
#include "dsl/tree_merge.hpp"

namespace recipe::dsl {
namespace {

using load_detail::Json;

struct ParsedOverride {
  std::vector<std::string> keys;
  char op = '=';  // '=', '+', '-', '*', '/'
  std::string value;
};

std::string trim(std::string_view s) {
  std::size_t b = s.find_first_not_of(" \t");
  if (b == std::string_view::npos) return {};
  std::size_t e = s.find_last_not_of(" \t");
  return std::string(s.substr(b, e - b + 1));
}

[[noreturn]] void bad_form(const std::string& expr, const std::string& why) {
  throw RecipeError("override `" + expr + "`: " + why +
                    "; expected key.path=value (or +=, -=, *=, /=), e.g. trainer.max_steps=200");
}

bool is_key_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

ParsedOverride parse(const std::string& expr) {
  const std::size_t eq = expr.find('=');
  if (eq == std::string::npos) bad_form(expr, "no '=' in it");
  ParsedOverride out;
  std::size_t key_end = eq;
  if (eq > 0 && std::string_view("+-*/").find(expr[eq - 1]) != std::string_view::npos) {
    out.op = expr[eq - 1];
    key_end = eq - 1;
  }
  const std::string key = trim(std::string_view(expr).substr(0, key_end));
  if (key.empty()) bad_form(expr, "the key is missing");
  std::size_t begin = 0;
  while (true) {
    std::size_t dot = key.find('.', begin);
    std::string part = key.substr(begin, dot == std::string::npos ? std::string::npos : dot - begin);
    if (part.empty()) bad_form(expr, "the key '" + key + "' has an empty part");
    for (char c : part)
      if (!is_key_char(c)) bad_form(expr, "the key '" + key + "' has a '" + std::string(1, c) + "' in it");
    out.keys.push_back(part);
    if (dot == std::string::npos) break;
    begin = dot + 1;
  }
  if (out.keys.size() > static_cast<std::size_t>(load_detail::kMaxTreeDepth))
    bad_form(expr, "the key has more than " + std::to_string(load_detail::kMaxTreeDepth) + " parts");
  out.value = trim(std::string_view(expr).substr(eq + 1));
  if (!load_detail::is_utf8(out.value)) bad_form(expr, "the value is not valid UTF-8 text");
  return out;
}

std::optional<std::string> unquote(const std::string& s) {
  if (s.size() >= 2 && (s.front() == '"' || s.front() == '\'') && s.back() == s.front())
    return s.substr(1, s.size() - 2);
  return std::nullopt;
}

std::optional<Json> parse_number(const std::string& s) {
  if (s.empty()) return std::nullopt;
  const char* first = s.data();
  const char* last = s.data() + s.size();
  if (*first == '+') ++first;
  if (first == last || !(std::isdigit(static_cast<unsigned char>(*first)) || *first == '-' || *first == '.'))
    return std::nullopt;
  if (s.find_first_of(".eE") == std::string::npos) {
    std::int64_t i = 0;
    auto [end, ec] = std::from_chars(first, last, i);
    if (ec == std::errc() && end == last) return Json(i);
  }
  // from_chars also reads "inf" and "nan"; the first-character check above keeps them strings.
  double d = 0;
  auto [end, ec] = std::from_chars(first, last, d);
  if (ec == std::errc() && end == last && std::isfinite(d)) return Json(d);
  return std::nullopt;
}

// A single value: quoted → string; int; float; true/false; else the text as a string.
Json parse_scalar(const std::string& text) {
  if (auto inner = unquote(text)) return *inner;
  if (auto number = parse_number(text)) return *number;
  if (text == "true") return true;
  if (text == "false") return false;
  return text;
}

std::vector<std::string> split_items(const std::string& text) {
  std::vector<std::string> items;
  std::string current;
  char quote = 0;
  for (char c : text) {
    if (quote) {
      if (c == quote) quote = 0;
      current += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      current += c;
    } else if (c == ',') {
      items.push_back(trim(current));
      current.clear();
    } else {
      current += c;
    }
  }
  items.push_back(trim(current));
  return items;
}

Json parse_list(const std::string& inner, const std::string& expr) {
  Json list = Json::array();
  if (trim(inner).empty()) return list;
  for (const auto& item : split_items(inner)) {
    if (item.empty()) throw RecipeError("override `" + expr + "`: the list has an empty item");
    list.push_back(parse_scalar(item));
  }
  return list;
}

// Typed by syntax; `existing` (may be null) decides only where the syntax alone is ambiguous.
Json parse_value(const std::string& text, const Json* existing, const std::string& expr) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']')
    return parse_list(text.substr(1, text.size() - 2), expr);
  if (existing && existing->is_array() && !unquote(text)) return parse_list(text, expr);
  // A string-valued key keeps a string even when the text looks like a number (name=2024).
  if (existing && existing->is_string()) return unquote(text).value_or(text);
  Json value = parse_scalar(text);
  if (existing && existing->is_number_float() && value.is_number_integer())
    return static_cast<double>(value.get<std::int64_t>());
  return value;
}

const char* type_name(const Json& v) {
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "a list";
  if (v.is_object()) return "a table";
  return "empty";
}

std::string dump(const Json& v) { return v.dump(); }

Json arithmetic(const Json& current, char op, const Json& operand, const std::string& path, const std::string& expr) {
  auto fail = [&](const std::string& why) -> Json { throw RecipeError("override `" + expr + "`: " + why); };
  if (!operand.is_number()) return fail("'" + operand.dump() + "' is not a number");
  if (current.is_number_integer() && operand.is_number_integer()) {
    const std::int64_t a = current.get<std::int64_t>(), b = operand.get<std::int64_t>();
    std::int64_t r = 0;
    bool overflow = false;
    switch (op) {
      case '+':
        overflow = __builtin_add_overflow(a, b, &r);
        break;
      case '-':
        overflow = __builtin_sub_overflow(a, b, &r);
        break;
      case '*':
        overflow = __builtin_mul_overflow(a, b, &r);
        break;
      case '/':
        if (b == 0) return fail("division by zero");
        // Whole results stay integers (global_batch_size/=2); others become floats.
        if (a % b == 0) return a / b;
        return static_cast<double>(a) / static_cast<double>(b);
    }
    if (overflow) return fail(path + "=" + dump(current) + " " + op + " " + dump(operand) + " overflows");
    return r;
  }
  const double a = current.get<double>(), b = operand.get<double>();
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    default:
      if (b == 0) return fail("division by zero");
      return a / b;
  }
}

Json list_update(const Json& current, char op, const Json& operand, const std::string& path, const std::string& expr) {
  const Json items = operand.is_array() ? operand : Json::array({operand});
  Json result = current;
  if (op == '+') {
    for (const auto& item : items) result.push_back(item);
    return result;
  }
  if (op == '-') {
    for (const auto& item : items) {
      auto it = std::find(result.begin(), result.end(), item);
      if (it == result.end())
        throw RecipeError("override `" + expr + "`: " + item.dump() + " is not in " + path + "=" + current.dump());
      result.erase(it);
    }
    return result;
  }
  throw RecipeError("override `" + expr + "`: " + path +
                    " is a list; lists take = (replace), += (append) "
                    "or -= (remove)");
}

}  // namespace

void apply_override(ConfigTree& tree, const std::string& override_expr) {
  const ParsedOverride ov = parse(override_expr);
  if (!tree.root.is_object()) tree.root = Json::object();

  // Look the key up without creating anything, so a failing override leaves the tree as it was.
  std::string path;
  const Json* parent = &tree.root;
  for (std::size_t i = 0; i + 1 < ov.keys.size(); ++i) {
    path = load_detail::join_path(path, ov.keys[i]);
    if (!parent) continue;
    auto it = parent->find(ov.keys[i]);
    if (it == parent->end()) {
      parent = nullptr;
    } else if (!it->is_object()) {
      throw RecipeError("override `" + override_expr + "`: " + path + " is " + type_name(*it) + " (" + it->dump() +
                        "), not a table, so it has no key '" + ov.keys[i + 1] + "'");
    } else {
      parent = &*it;
    }
  }
  path = load_detail::join_path(path, ov.keys.back());
  const Json* existing = nullptr;
  if (parent) {
    auto it = parent->find(ov.keys.back());
    if (it != parent->end()) existing = &*it;
  }

  Json value;
  if (ov.op == '=') {
    if (ov.value.empty() && !(existing && existing->is_string()))
      throw RecipeError("override `" + override_expr + "`: no value after '='; to set an empty string write " + path +
                        "=\"\"");
    value = parse_value(ov.value, existing, override_expr);
  } else {
    const std::string op_text = std::string(1, ov.op) + "=";
    if (!existing)
      throw RecipeError("override `" + override_expr + "`: " + path +
                        " is not set by the recipe, so there is "
                        "nothing to " +
                        op_text + "; set it with " + path + "=<value>");
    if (ov.value.empty()) bad_form(override_expr, "no value after '" + op_text + "'");
    if (existing->is_array()) {
      value = list_update(*existing, ov.op, parse_value(ov.value, existing, override_expr), path, override_expr);
    } else if (existing->is_number()) {
      value = arithmetic(*existing, ov.op, parse_scalar(ov.value), path, override_expr);
    } else {
      throw RecipeError("override `" + override_expr + "`: " + op_text + " needs a number or a list, but " + path +
                        " is " + type_name(*existing) + " (" + existing->dump() + ")");
    }
  }

  Json* node = &tree.root;
  for (std::size_t i = 0; i + 1 < ov.keys.size(); ++i) {
    Json& child = (*node)[ov.keys[i]];
    if (child.is_null()) child = Json::object();
    node = &child;
  }
  (*node)[ov.keys.back()] = std::move(value);

  Origin origin;
  origin.file = "override";
  origin.expr = override_expr;
  tree.origins[path] = origin;
  load_detail::prune_origins(tree);
  load_detail::canonicalize(tree.root);
}

void apply_overrides(ConfigTree& tree, const std::vector<std::string>& overrides) {
  for (const auto& expr : overrides) apply_override(tree, expr);
}

}  // namespace recipe::dsl

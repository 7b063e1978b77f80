#include "dsl/key_reference.hpp"

#include <sstream>

#include "dsl/plan_fields.hpp"

namespace recipe::dsl {
namespace {

// Defaults are the values of a default-constructed plan::Plan: plan.hpp's initializers are the only
// place a default is written down.
std::string default_of(const FieldInfo& f) {
  static const plan::Plan defaults;
  const auto v = f.get(defaults);
  if (v.is_string()) return v.get<std::string>().empty() ? "\"\"" : "\"" + v.get<std::string>() + "\"";
  return v.dump();
}

std::string doc_of(const FieldInfo& f) {
  std::string doc = f.doc;
  if (!f.allowed.empty()) {
    if (!doc.empty() && doc.back() != '.') doc += ".";
    doc += " One of:";
    for (size_t i = 0; i < f.allowed.size(); ++i) doc += (i ? ", " : " ") + std::string("`") + f.allowed[i] + "`";
    doc += ".";
  }
  return doc;
}

std::string escape_cell(std::string s) {
  std::string out;
  for (char c : s) out += c == '|' ? std::string("\\|") : std::string(1, c);
  return out;
}

}  // namespace

std::string key_reference_markdown() {
  std::ostringstream o;
  o << "# Recipe reference\n\n"
       "Every key a recipe (Lua or TOML) or a dotted override may set, with its type, default and\n"
       "meaning. Generated from the resolver's field table by `recipe keys --format markdown`; a test\n"
       "keeps this file equal to that output. Unknown keys are errors (with suggestions), and so is\n"
       "setting a derived value.\n";
  std::string section = "\x01";
  for (const FieldInfo& f : plan_fields()) {
    if (f.section != section) {
      section = f.section;
      o << "\n## " << (section.empty() ? std::string("top level") : "`" + section + "`") << "\n\n"
        << "| key | type | default | meaning |\n|---|---|---|---|\n";
    }
    o << "| `" << f.path() << "` | " << field_type_name(f.type) << " | `" << escape_cell(default_of(f)) << "` | "
      << escape_cell(doc_of(f)) << " |\n";
  }
  o << "\n## Derived values\n\n"
       "Computed by the resolver, written to the `[derived]` table of `resolved.toml`, shown by\n"
       "`recipe show`; a recipe cannot set them.\n\n| value | how it is computed |\n|---|---|\n";
  for (const DerivedFieldInfo& d : derived_fields()) o << "| `" << d.path << "` | " << escape_cell(d.formula) << " |\n";
  return o.str();
}

std::string key_reference_text() {
  std::ostringstream o;
  size_t width = 0;
  for (const FieldInfo& f : plan_fields()) width = std::max(width, f.path().size());
  for (const FieldInfo& f : plan_fields()) {
    std::string p = f.path();
    o << p << std::string(width + 2 - p.size(), ' ') << "= " << default_of(f) << "  (" << field_type_name(f.type)
      << ")  " << doc_of(f) << "\n";
  }
  return o.str();
}

}  // namespace recipe::dsl

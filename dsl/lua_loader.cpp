// The Lua recipe sandbox: a fresh interpreter per load with only base (no dofile/loadfile, text-only
// load), string (no dump), table, math and utf8; `preset` and a search-path-only `require` come
// from the prelude. A counting hook and a capped allocator stop runaway recipes.
//
// Lua is built as C, so its errors unwind with longjmp: functions Lua calls back into (host_*,
// protected_main, the hook, the allocator) keep no C++ objects with destructors alive across a Lua
// API call that may raise; C++ work happens in Sandbox members that catch their own exceptions.
#include "dsl/lua_loader.hpp"

#include <lua.hpp>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <algorithm>
#include <map>

#include "dsl/key_lines.hpp"
#include "dsl/lua_prelude.hpp"
#include "dsl/recipe_files.hpp"
#include "dsl/shown_text.hpp"
#include "dsl/tree_merge.hpp"

namespace recipe::dsl::load_detail {
namespace {

constexpr int kHookEvery = 1000;  // instructions between two calls of the counting hook
constexpr int kMaxDepth = 32;     // Lua tables (below kMaxTreeDepth: a Lua recipe nests no deeper)
// What a recipe's `print` may write in one load. Enough for any debugging print; a loop printing
// a long string (1 GB in 30 s) would fill a disk or a log, and a run's logs are kept.
constexpr std::size_t kMaxPrintBytes = 64 * 1024;

// `s` with each invalid byte shown as U+FFFD, for a message that must not carry invalid UTF-8.
std::string shown_utf8(const std::string& s) {
  const std::string quoted =
      Json(s.size() > 200 ? s.substr(0, 200) : s).dump(-1, ' ', false, Json::error_handler_t::replace);
  return quoted + (s.size() > 200 ? "..." : "");
}

enum class Limit { none, memory, instructions };

struct OriginHint {
  std::string source;  // "@path" of the chunk that set the value
  int line = 1;        // where to start looking for the key in that chunk
};

struct Sandbox {
  // Allocator and hook state.
  std::size_t used = 0;
  std::size_t memory_limit = 0;
  std::uint64_t instructions = 0;
  std::uint64_t instruction_limit = 0;
  Limit hit = Limit::none;
  std::size_t printed = 0;  // bytes `print` wrote; past kMaxPrintBytes it writes nothing
  char where[1024] = {};    // "file:line: " of the code that ran past the instruction limit
  std::string memory_message, instruction_message;

  std::vector<std::string> search_path;
  std::map<std::string, std::string> texts;   // "@path" → source text of every chunk loaded
  std::map<std::string, std::string> labels;  // "@path" → origin label ("preset:x" or the path)
  std::string error;                          // message of the last failed host lookup

  bool run_preset = false;
  std::string top;         // recipe path or preset name
  std::string top_label;   // origin label of values the recipe itself sets
  std::string top_source;  // "@path" of the recipe file ("" for a preset by name)
  const std::string* top_text = nullptr;
  lua_State* L = nullptr;

  ~Sandbox();

  bool open_preset(const char* name, const char*& path, const char*& text, std::size_t& text_len) noexcept;
  void serve(const char* key, const char*& path, const char*& text, std::size_t& len) const;
  bool open_module(const char* name, const char*& path, const char*& text, std::size_t& text_len) noexcept;
  const char* register_file(const std::string& file, const std::string& label);
};

Sandbox* sandbox_of(lua_State* L) {
  void* ud = nullptr;
  lua_getallocf(L, &ud);
  return static_cast<Sandbox*>(ud);
}

void* sandbox_alloc(void* ud, void* ptr, std::size_t osize, std::size_t nsize) noexcept {
  auto* s = static_cast<Sandbox*>(ud);
  const std::size_t old = ptr ? osize : 0;  // without a block, osize says what kind of object it is
  if (nsize == 0) {
    std::free(ptr);
    s->used -= old;
    return nullptr;
  }
  if (nsize > old && s->used - old + nsize > s->memory_limit) {
    if (s->hit == Limit::none) s->hit = Limit::memory;
    return nullptr;
  }
  void* block = std::realloc(ptr, nsize);
  if (block)
    s->used = s->used - old + nsize;
  else if (s->hit == Limit::none)
    s->hit = Limit::memory;  // the process bound (isolated_eval.hpp) was reached first
  return block;
}

const char* limit_message(Sandbox* s) {
  return s->hit == Limit::memory ? s->memory_message.c_str() : s->instruction_message.c_str();
}

void count_hook(lua_State* L, lua_Debug*) {
  Sandbox* s = sandbox_of(L);
  s->instructions += kHookEvery;
  if (s->instructions <= s->instruction_limit) return;
  if (s->hit == Limit::none) {
    s->hit = Limit::instructions;
    lua_Debug ar;
    if (lua_getstack(L, 0, &ar) && lua_getinfo(L, "Sl", &ar) && ar.source[0] == '@' && ar.currentline > 0)
      std::snprintf(s->where, sizeof s->where, "%s:%d: ", ar.source + 1, ar.currentline);
  }
  lua_pushstring(L, limit_message(s));
  lua_error(L);
}

Sandbox::~Sandbox() {
  if (!L) return;
  // Finalizers a recipe left behind run in lua_close: give them a small budget, not a fresh one.
  instructions = instruction_limit > 1'000'000 ? instruction_limit - 1'000'000 : 0;
  lua_sethook(L, count_hook, LUA_MASKCOUNT, kHookEvery);
  lua_close(L);
}

// ---- C helpers handed to the prelude ------------------------------------------------------------

const char* Sandbox::register_file(const std::string& file, const std::string& label) {
  auto [it, inserted] = texts.try_emplace("@" + file);
  if (inserted) {
    try {
      it->second = read_text_file(file);
    } catch (...) {
      texts.erase(it);
      throw;
    }
  }
  labels.try_emplace(it->first, label);
  return it->first.c_str();
}

// Hands Lua a registered file: `key` is the "@path" chunk name; path skips the '@'.
void Sandbox::serve(const char* key, const char*& path, const char*& text, std::size_t& len) const {
  const std::string& body = texts.at(key);
  path = key + 1;
  text = body.data();
  len = body.size();
}

bool Sandbox::open_preset(const char* name, const char*& path, const char*& text, std::size_t& len) noexcept {
  try {
    const std::string wanted(name);
    if (!is_safe_relative_name(wanted)) {
      error = "'" + wanted + "' is not a preset name (presets are found by name on the recipe search path)";
      return false;
    }
    auto file = find_lua_file(wanted, search_path);
    if (!file) {
      error = unknown_preset_message(wanted, search_path);
      return false;
    }
    serve(register_file(*file, "preset:" + wanted), path, text, len);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "cannot open preset";
  }
  return false;
}

bool Sandbox::open_module(const char* name, const char*& path, const char*& text, std::size_t& len) noexcept {
  try {
    std::string wanted(name);
    if (wanted.find("..") != std::string::npos || wanted.empty() || wanted.front() == '/' ||
        wanted.find('\\') != std::string::npos) {
      error = "require '" + wanted +
              "': modules are found by plain name on the recipe search path; "
              "'..' and absolute paths are not allowed";
      return false;
    }
    std::string relative = wanted;
    for (char& c : relative)
      if (c == '.') c = '/';
    auto file = find_lua_file(relative, search_path);
    if (!file) {
      static const char* const kStdlibs[] = {"os", "io", "debug", "package", "coroutine", "ffi", "jit"};
      for (const char* lib : kStdlibs)
        if (wanted == lib) {
          error = "module '" + wanted +
                  "' is not available in recipes (a recipe cannot use os, io, debug or "
                  "package: it describes a run, it does not run commands or read files)";
          return false;
        }
      error = "module '" + wanted + "' not found: no " + relative + ".lua in the recipe search path (";
      for (std::size_t i = 0; i < search_path.size(); ++i) error += (i ? ", " : "") + search_path[i];
      error += "; add folders with RECIPE_PATH)";
      return false;
    }
    serve(register_file(*file, *file), path, text, len);
    return true;
  } catch (const std::exception& e) {
    error = e.what();
  } catch (...) {
    error = "cannot open module";
  }
  return false;
}

int push_lookup(lua_State* L, bool found, const char* path, const char* text, std::size_t len) {
  if (!found) {
    lua_pushnil(L);
    lua_pushstring(L, sandbox_of(L)->error.c_str());
    return 2;
  }
  lua_pushstring(L, path);
  lua_pushlstring(L, text, len);
  return 2;
}

int host_read_preset(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  const char* path = nullptr;
  const char* text = nullptr;
  std::size_t len = 0;
  bool found = sandbox_of(L)->open_preset(name, path, text, len);
  return push_lookup(L, found, path, text, len);
}

int host_read_module(lua_State* L) {
  const char* name = luaL_checkstring(L, 1);
  const char* path = nullptr;
  const char* text = nullptr;
  std::size_t len = 0;
  bool found = sandbox_of(L)->open_module(name, path, text, len);
  return push_lookup(L, found, path, text, len);
}

// Source and line of the code that called the prelude function calling this, unless that function
// was reached by a tail call (`return base { ... }`), which leaves no caller to ask.
int host_caller(lua_State* L) {
  lua_Debug ar;
  if (!lua_getstack(L, 1, &ar) || !lua_getinfo(L, "t", &ar) || ar.istailcall) return 0;
  if (!lua_getstack(L, 2, &ar) || !lua_getinfo(L, "Sl", &ar)) return 0;
  if (ar.source == nullptr || ar.source[0] != '@' || ar.currentline <= 0) return 0;
  lua_pushstring(L, ar.source);
  lua_pushinteger(L, ar.currentline);
  return 2;
}

int host_limit_hit(lua_State* L) {
  lua_pushboolean(L, sandbox_of(L)->hit != Limit::none);
  return 1;
}

int host_limit_message(lua_State* L) {
  Sandbox* s = sandbox_of(L);
  lua_pushstring(L, s->hit == Limit::instructions ? s->where : "");
  lua_pushstring(L, limit_message(s));
  lua_concat(L, 2);
  return 1;
}

// Writes what fits under kMaxPrintBytes; the first byte that does not fit prints a one-line notice.
void print_bounded(Sandbox* s, const char* text, std::size_t len) {
  if (s->printed > kMaxPrintBytes) return;  // cut already, notice given
  const std::size_t take = std::min(len, kMaxPrintBytes - s->printed);
  std::fwrite(text, 1, take, stdout);
  s->printed += take;
  if (take < len) {
    std::fprintf(stdout, "\n[recipe: the recipe's print output is cut at %zu bytes; the rest is not shown]\n",
                 kMaxPrintBytes);
    s->printed = kMaxPrintBytes + 1;
  }
}

// Lua's print (tostring of each argument, tab-separated, a newline), bounded by print_bounded.
// luaL_tolstring may raise (a __tostring that errors): no C++ object is alive across it.
int host_print(lua_State* L) {
  Sandbox* s = sandbox_of(L);
  const int n = lua_gettop(L);
  for (int i = 1; i <= n; ++i) {
    std::size_t len = 0;
    const char* text = luaL_tolstring(L, i, &len);
    if (i > 1) print_bounded(s, "\t", 1);
    print_bounded(s, text, len);
    lua_pop(L, 1);
  }
  print_bounded(s, "\n", 1);
  std::fflush(stdout);
  return 0;
}

// Sets up the sandbox and runs the recipe; returns (config, origins). Runs under lua_pcall.
int protected_main(lua_State* L) {
  Sandbox* s = sandbox_of(L);
  const luaL_Reg libs[] = {{LUA_GNAME, luaopen_base},
                           {LUA_STRLIBNAME, luaopen_string},
                           {LUA_TABLIBNAME, luaopen_table},
                           {LUA_MATHLIBNAME, luaopen_math},
                           {LUA_UTF8LIBNAME, luaopen_utf8}};
  for (const auto& lib : libs) {
    luaL_requiref(L, lib.name, lib.func, 1);
    lua_pop(L, 1);
  }
  lua_pushcfunction(L, host_print);
  lua_setglobal(L, "print");
  if (luaL_loadbufferx(L, kLuaSandboxPrelude, std::strlen(kLuaSandboxPrelude), "=recipe sandbox", "t") != LUA_OK)
    return lua_error(L);
  const luaL_Reg host[] = {{"read_preset", host_read_preset},
                           {"read_module", host_read_module},
                           {"caller", host_caller},
                           {"limit_hit", host_limit_hit},
                           {"limit_message", host_limit_message}};
  lua_createtable(L, 0, 5);
  for (const auto& fn : host) {
    lua_pushcfunction(L, fn.func);
    lua_setfield(L, -2, fn.name);
  }
  lua_call(L, 1, 1);
  lua_sethook(L, count_hook, LUA_MASKCOUNT, kHookEvery);
  if (s->run_preset) {
    lua_getfield(L, -1, "run_preset");
    lua_pushstring(L, s->top.c_str());
    lua_call(L, 1, 2);
  } else {
    lua_getfield(L, -1, "run_file");
    lua_pushstring(L, s->top.c_str());
    lua_pushlstring(L, s->top_text->data(), s->top_text->size());
    lua_call(L, 2, 2);
  }
  return 2;
}

// ---- results and errors -------------------------------------------------------------------------

// Lua shortens long chunk names to "...<tail>"; put the full path back.
std::string restore_path(std::string msg, const Sandbox& s) {
  if (msg.rfind("...", 0) != 0) return msg;
  std::string rest = msg.substr(3);
  for (const auto& [source, text] : s.texts) {
    const std::string path = source.substr(1);
    for (std::size_t colon = rest.find(':'); colon != std::string::npos; colon = rest.find(':', colon + 1)) {
      std::string tail = rest.substr(0, colon);
      if (tail.size() >= 8 && path.size() >= tail.size() &&
          path.compare(path.size() - tail.size(), tail.size(), tail) == 0)
        return path + rest.substr(colon);
    }
  }
  return msg;
}

// "file:12: ..." — does the message already say where?
bool has_position(const std::string& msg) {
  for (std::size_t colon = msg.find(':'); colon != std::string::npos && colon < 1024;
       colon = msg.find(':', colon + 1)) {
    std::size_t digits = colon + 1;
    while (digits < msg.size() && msg[digits] >= '0' && msg[digits] <= '9') ++digits;
    if (digits > colon + 1 && digits < msg.size() && msg[digits] == ':') return true;
  }
  return false;
}

std::string failure_message(lua_State* L, const Sandbox& s) {
  if (s.hit == Limit::memory) return s.top_label + ": " + s.memory_message;
  if (s.hit == Limit::instructions)
    return (s.where[0] ? std::string(s.where) : s.top_label + ": ") + s.instruction_message;
  std::string msg = lua_type(L, -1) == LUA_TSTRING
                        ? std::string(lua_tostring(L, -1))
                        : std::string("error object is a ") + luaL_typename(L, -1) + " value";
  // error(string.rep("x", 1e7)) is not echoed whole; the "file:line:" start stays intact.
  msg = shown_value(restore_path(msg, s), kMaxShownMessage);
  return has_position(msg) ? msg : s.top_label + ": " + msg;
}

bool is_map_path(const std::string& path) { return path == "executor.env" || path == "executor.mca"; }

// Converts the Lua value at `idx` without raising Lua errors (no allocation in Lua, raw access).
class Converter {
 public:
  explicit Converter(lua_State* L) : L_(L) {}
  std::string bad_path, problem;

  bool convert(int idx, const std::string& path, int depth, Json& out) {
    switch (lua_type(L_, idx)) {
      case LUA_TBOOLEAN:
        out = static_cast<bool>(lua_toboolean(L_, idx));
        return true;
      case LUA_TSTRING: {
        std::size_t len = 0;
        const char* str = lua_tolstring(L_, idx, &len);
        std::string text(str, len);
        if (!is_utf8(text))
          return fail(path, "= " + shown_utf8(text) + " is not valid UTF-8 text (recipe strings are UTF-8)");
        out = std::move(text);
        return true;
      }
      case LUA_TNUMBER:
        if (lua_isinteger(L_, idx)) {
          out = static_cast<std::int64_t>(lua_tointeger(L_, idx));
          return true;
        }
        if (double v = lua_tonumber(L_, idx); std::isfinite(v)) {
          out = v;
          return true;
        }
        return fail(path, "is not a finite number");
      case LUA_TTABLE:
        return convert_table(idx, path, depth, out);
      default:
        return fail(path, std::string("is a ") + luaL_typename(L_, idx) +
                              "; recipe values are numbers, strings, booleans and tables");
    }
  }

 private:
  lua_State* L_;

  bool fail(const std::string& path, const std::string& what) {
    bad_path = path;
    problem = what;
    return false;
  }

  bool convert_table(int idx, const std::string& path, int depth, Json& out) {
    if (depth > kMaxDepth || !lua_checkstack(L_, 4))
      return fail(path, "is nested too deeply (does a table contain itself?)");
    std::map<lua_Integer, Json> items;
    Json object = Json::object();
    lua_pushnil(L_);
    while (lua_next(L_, idx) != 0) {
      const int value = lua_gettop(L_);
      const int key = value - 1;
      Json converted;
      if (lua_type(L_, key) == LUA_TSTRING) {
        std::size_t len = 0;
        const char* name = lua_tolstring(L_, key, &len);
        std::string child(name, len);
        if (!is_utf8(child)) {
          fail(path, "has the key " + shown_utf8(child) + ", which is not valid UTF-8 text (keys are UTF-8)");
          return pop_fail(2);
        }
        if (!convert(value, join_path(path, child), depth + 1, converted)) return pop_fail(2);
        append_new_key(object, std::move(child), std::move(converted));  // a Lua table's keys are unique
      } else if (lua_type(L_, key) == LUA_TNUMBER && lua_isinteger(L_, key)) {
        lua_Integer at = lua_tointeger(L_, key);
        if (!convert(value, path + "[" + std::to_string(at) + "]", depth + 1, converted)) return pop_fail(2);
        items.emplace(at, std::move(converted));
      } else {
        fail(path, std::string("has a key of type ") + luaL_typename(L_, key) +
                       "; tables are lists {a, b} or have names as keys {name = value}");
        return pop_fail(2);
      }
      lua_pop(L_, 1);
    }
    if (!items.empty() && !object.empty())
      return fail(path, "mixes list items and named keys; use either {a, b} or {name = value}");
    if (!items.empty()) {
      lua_Integer expected = 1;
      for (const auto& [at, v] : items)
        if (at != expected++)
          return fail(
              path, "is a list with gaps (it has no item " + std::to_string(expected - 1) + "); lists hold items 1..n");
      out = Json::array();
      for (auto& [at, v] : items) out.push_back(std::move(v));
      return true;
    }
    // An empty table is an empty list, except where only a table of names makes sense.
    if (object.empty() && depth > 1 && !is_map_path(path)) {
      out = Json::array();
      return true;
    }
    out = std::move(object);
    return true;
  }

  bool pop_fail(int n) {
    lua_pop(L_, n);
    return false;
  }
};

std::map<std::string, OriginHint> read_origin_hints(lua_State* L, int idx) {
  std::map<std::string, OriginHint> hints;
  if (lua_type(L, idx) != LUA_TTABLE || !lua_checkstack(L, 4)) return hints;
  lua_pushnil(L);
  while (lua_next(L, idx) != 0) {
    if (lua_type(L, -2) == LUA_TSTRING && lua_type(L, -1) == LUA_TTABLE) {
      OriginHint hint;
      if (lua_rawgeti(L, -1, 1) == LUA_TSTRING) hint.source = lua_tostring(L, -1);
      if (lua_rawgeti(L, -2, 2) == LUA_TNUMBER) hint.line = static_cast<int>(lua_tointeger(L, -1));
      lua_pop(L, 2);
      hints.emplace(lua_tostring(L, -2), std::move(hint));
    }
    lua_pop(L, 1);
  }
  return hints;
}

std::string strip_indices(const std::string& path) { return path.substr(0, path.find('[')); }

ConfigTree run(Sandbox& s, const LuaLimits& limits) {
  s.memory_limit = limits.memory_bytes;
  s.instruction_limit = limits.instructions;
  const std::size_t memory = std::min(limits.memory_bytes, limits.process.memory_bytes);
  s.memory_message = "recipe exceeded the memory limit (" + std::to_string(memory >> 20) + " MiB)";
  s.instruction_message = "recipe exceeded the instruction limit (" + std::to_string(limits.instructions / 1'000'000) +
                          " million Lua instructions); does it loop forever?";
  s.L = lua_newstate(sandbox_alloc, &s);
  if (!s.L) throw RecipeError(s.top_label + ": cannot start the Lua interpreter");
  lua_State* L = s.L;
  lua_pushcfunction(L, protected_main);
  if (lua_pcall(L, 0, 2, 0) != LUA_OK) throw RecipeError(failure_message(L, s));

  // The recipe is done; what follows only reads its result (a little headroom for stack growth).
  lua_sethook(L, nullptr, 0, 0);
  s.memory_limit = s.used + (std::size_t{16} << 20);
  const int config_idx = lua_gettop(L) - 1;
  auto hints = read_origin_hints(L, config_idx + 1);

  std::map<std::string, KeyLines> key_lines;  // "@path" → its lines, split once
  auto locate = [&](const std::string& path) -> Origin {
    const std::string key = strip_indices(path);
    auto hint = hints.find(key);
    const std::string source = hint != hints.end() ? hint->second.source : s.top_source;
    const int from = hint != hints.end() ? hint->second.line : 1;
    auto label = s.labels.find(source);
    auto text = s.texts.find(source);
    Origin origin;
    origin.file = label != s.labels.end() ? label->second : (source.empty() ? s.top_label : source.substr(1));
    if (text != s.texts.end()) {
      auto lines = key_lines.try_emplace(text->first, text->second).first;
      origin.line = lines->second.find(from, key);
    }
    return origin;
  };

  ConfigTree tree;
  Converter converter(L);
  if (!converter.convert(config_idx, "", 0, tree.root)) {
    const std::string shown = converter.bad_path.empty() ? "the returned table" : converter.bad_path;
    Origin where = converter.bad_path.empty() ? Origin{s.top_label, 0} : locate(converter.bad_path);
    throw RecipeError(where.str() + ": " + shown + " " + converter.problem);
  }
  // An empty recipe is a mistake (a truncated file, a forgotten preset), not a request for the
  // built-in defaults: the same rule as an empty TOML file (toml_loader.cpp).
  if (tree.root.empty())
    throw RecipeError(s.top_label +
                      ": the recipe is empty (it returns an empty table); return a preset and the keys to change, "
                      "e.g. return preset \"gpt_tiny\" { trainer = { max_steps = 100 } } (`recipe list` shows the "
                      "presets)");
  if (!tree.root.is_object())
    throw RecipeError(s.top_label +
                      ": a recipe returns a table of sections, e.g. { model = { ... }, "
                      "trainer = { ... } }, not a list");
  for_each_leaf(tree.root, [&](const std::string& path, const Json&) { tree.origins[path] = locate(path); });
  canonicalize(tree.root);
  return tree;
}

}  // namespace

ConfigTree load_lua_file(const std::string& path, const std::vector<std::string>& search_path,
                         const LuaLimits& limits) {
  return evaluate_isolated(path, limits.process, [&] {
    ConfigTree tree;
    {
      Sandbox s;  // closed (finalizers run) inside the bounded child, before the tree is sent
      s.search_path = search_path;
      s.top = path;
      s.top_label = path;
      s.top_source = s.register_file(path, path);
      s.top_text = &s.texts.at(s.top_source);
      tree = run(s, limits);
    }
    tree.source = path;
    return tree;
  });
}

ConfigTree load_lua_preset(const std::string& name, const std::vector<std::string>& search_path,
                           const LuaLimits& limits) {
  return evaluate_isolated("preset:" + name, limits.process, [&] {
    ConfigTree tree;
    {
      Sandbox s;
      s.search_path = search_path;
      s.run_preset = true;
      s.top = name;
      s.top_label = "preset:" + name;
      tree = run(s, limits);
    }
    tree.source = name;
    return tree;
  });
}

}  // namespace recipe::dsl::load_detail

// Internal to dsl/: the Lua half of the recipe sandbox (preset objects, deep merge, origins,
// guarded require/load/pcall). Its text lives in lua_prelude.cpp.
#pragma once

namespace recipe::dsl::load_detail {

// A Lua chunk run once per sandbox as `prelude(host)`, `host` holding the C helpers (see
// lua_loader.cpp). It installs the recipe globals and returns { run_file = f, run_preset = f }, both
// returning (config, origins) where origins maps a dotted leaf path to { "@file", line_hint }.
extern const char* const kLuaSandboxPrelude;

}  // namespace recipe::dsl::load_detail

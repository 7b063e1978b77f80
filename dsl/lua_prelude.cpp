#include "dsl/lua_prelude.hpp"

namespace recipe::dsl::load_detail {

// Everything the prelude needs is captured in locals before any recipe code runs, so a recipe that
// replaces globals (next, string.gmatch, ...) cannot change how presets merge or where errors point.
const char* const kLuaSandboxPrelude = R"LUA(
local host = ...
local G = _G
local type, next, error, tostring, setmetatable, rawget, rawset, rawlen, rawequal =
      type, next, error, tostring, setmetatable, rawget, rawset, rawlen, rawequal
local mtype, gmatch, smatch = math.type, string.gmatch, string.match
local real_load, real_pcall, real_xpcall = load, pcall, xpcall
local limit_hit, caller = host.limit_hit, host.caller

local MAX_DEPTH = 32
local function too_deep()
  error("recipe tables are nested more than " .. MAX_DEPTH .. " levels deep (does a table contain itself?)", 0)
end

-- An array is a non-empty table whose keys are exactly 1..n; arrays are values, never merged.
local function is_array(t)
  local n = rawlen(t)
  if n == 0 then return false end
  local count = 0
  for k in next, t do
    if mtype(k) ~= "integer" or k < 1 or k > n then return false end
    count = count + 1
  end
  return count == n
end

local function kind(v)
  if type(v) ~= "table" then return "scalar" end
  if next(v) == nil then return "empty" end
  if is_array(v) then return "array" end
  return "object"
end

local function copy(v, depth)
  if type(v) ~= "table" then return v end
  depth = depth or 0
  if depth > MAX_DEPTH then too_deep() end
  local out = {}
  for k, x in next, v do out[k] = copy(x, depth + 1) end
  return out
end

local function equal(a, b, depth)
  if type(a) ~= "table" or type(b) ~= "table" then
    return rawequal(a, b) and mtype(a) == mtype(b)
  end
  depth = depth or 0
  if depth > MAX_DEPTH then return false end
  for k, x in next, a do
    if not equal(x, rawget(b, k), depth + 1) then return false end
  end
  for k in next, b do
    if rawget(a, k) == nil then return false end
  end
  return true
end

local function join(prefix, k)
  if prefix then return prefix .. "." .. tostring(k) end
  return tostring(k)
end

-- Leaves are scalars, arrays and empty tables; other tables are walked.
local function each_leaf(t, prefix, fn, depth)
  if depth > MAX_DEPTH then too_deep() end
  for k, v in next, t do
    local path = join(prefix, k)
    if kind(v) == "object" then each_leaf(v, path, fn, depth + 1) else fn(path, v) end
  end
end

-- origins: dotted leaf path -> { "@file", line to start searching from, value as set }
local function record(origins, path, value, source, line)
  if kind(value) == "object" then
    each_leaf(value, path, function(p, v) origins[p] = { source, line, copy(v) } end, 0)
  else
    origins[path] = { source, line, copy(value) }
  end
end

local function copy_origins(origins)
  local out = {}
  for k, v in next, origins do out[k] = v end
  return out
end

-- Give every leaf not already recorded with its current value to `source`.
local function attribute_rest(config, origins, source)
  each_leaf(config, nil, function(path, v)
    local o = origins[path]
    if not (o and equal(o[3], v)) then origins[path] = { source, 1, copy(v) } end
  end, 0)
end

-- Tables merge key by key, an empty table adds nothing to a table, anything else replaces.
local function merge(dst, src, prefix, origins, source, line, depth)
  if depth > MAX_DEPTH then too_deep() end
  for k, v in next, src do
    local path = join(prefix, k)
    local cur = rawget(dst, k)
    local kv, kc = kind(v), kind(cur)
    if kv == "object" and kc == "object" then
      merge(cur, v, path, origins, source, line, depth + 1)
    elseif not (kv == "empty" and kc == "object") then
      local value = copy(v)
      rawset(dst, k, value)
      record(origins, path, value, source, line)
    end
  end
end

local chunks = {}  -- sources of the chunks being run, innermost last
local function current_source() return chunks[#chunks] end

local function return_line(text)
  local n, last = 0, nil
  if not smatch(text, "\n$") then text = text .. "\n" end
  for line in gmatch(text, "(.-)\n") do
    n = n + 1
    if smatch(line, "^%s*return%f[^%w_]") then last = n end
  end
  return last or n
end

local function run_chunk(path, text, what)
  local source = "@" .. path
  local fn, err = real_load(text, source, "t")
  if not fn then error(err, 0) end
  chunks[#chunks + 1] = source
  local ok, result = real_pcall(fn)
  chunks[#chunks] = nil
  if not ok then error(result, 0) end
  if what and type(result) ~= "table" then
    error(path .. ":" .. return_line(text) .. ": " .. what .. " must return a table, got " ..
          (result == nil and "nothing" or type(result)), 0)
  end
  return result
end

local origins_of = setmetatable({}, { __mode = "k" })
local preset_mt = { __metatable = "preset" }

local function new_object(config, origins)
  origins_of[config] = origins
  return setmetatable(config, preset_mt)
end

-- preset "x" { overrides }: a new preset object; the called one is left as it was.
preset_mt.__call = function(self, overrides)
  if type(overrides) ~= "table" then
    error('a preset takes a table of overrides, e.g. preset "gpt_tiny" { trainer = { max_steps = 10 } }', 2)
  end
  local source, line = caller()
  if not source then source, line = current_source(), 1 end
  local origins = copy_origins(origins_of[self] or {})
  local config = copy(self)
  merge(config, overrides, nil, origins, source, line, 0)
  return new_object(config, origins)
end

local loaded_presets, loading_presets = {}, {}

-- `level` is error()'s level for problems with the name itself (0 = no position).
local function load_preset(name, level)
  local obj = loaded_presets[name]
  if obj then return obj end
  if loading_presets[name] then error("preset '" .. name .. "' builds on itself", level) end
  local path, text = host.read_preset(name)
  if not path then error(text, level) end
  loading_presets[name] = true
  local ok, result = real_pcall(run_chunk, path, text, "a preset")
  loading_presets[name] = nil
  if not ok then error(result, 0) end
  local origins = copy_origins(origins_of[result] or {})
  local config = copy(result)
  attribute_rest(config, origins, "@" .. path)
  obj = new_object(config, origins)
  loaded_presets[name] = obj
  return obj
end

G.preset = function(name)
  if type(name) ~= "string" then error('preset takes a preset name, e.g. preset "gpt3_345m"', 2) end
  local obj = load_preset(name, 3)
  return new_object(copy(obj), copy_origins(origins_of[obj]))
end

local modules, LOADING = {}, {}
G.require = function(name)
  if type(name) ~= "string" then error("require takes a module name", 2) end
  local m = modules[name]
  if m == LOADING then error("module '" .. name .. "' requires itself", 2) end
  if m ~= nil then return m end
  local path, text = host.read_module(name)
  if not path then error(text, 2) end
  modules[name] = LOADING
  local ok, result = real_pcall(run_chunk, path, text)
  if not ok then modules[name] = nil; error(result, 0) end
  if result == nil then result = true end
  modules[name] = result
  return result
end

G.load = function(chunk, chunkname, mode, ...)
  if mode ~= nil and mode ~= "t" then
    error("load: recipes may only load text chunks (mode \"t\"), not precompiled bytecode", 2)
  end
  return real_load(chunk, chunkname, "t", ...)
end

-- A recipe must not be able to catch the errors that stop it for running too long or too big.
local function pass_unless_limit(ok, ...)
  if not ok and limit_hit() then error(host.limit_message(), 0) end
  return ok, ...
end
G.pcall = function(f, ...) return pass_unless_limit(real_pcall(f, ...)) end
G.xpcall = function(f, handler, ...) return pass_unless_limit(real_xpcall(f, handler, ...)) end

G.dofile, G.loadfile = nil, nil
G.string.dump = nil

return {
  run_file = function(path, text)
    local result = run_chunk(path, text, "a recipe")
    local origins = copy_origins(origins_of[result] or {})
    local config = copy(result)
    attribute_rest(config, origins, "@" .. path)
    return config, origins
  end,
  run_preset = function(name)
    local obj = load_preset(name, 0)
    return copy(obj), origins_of[obj]
  end,
}
)LUA";

}  // namespace recipe::dsl::load_detail

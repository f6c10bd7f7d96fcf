-- The runtime's prelude: builds the sandboxed environment every script runs in.
--
-- It runs once per Lua state, before any script, with the host's API table as its argument.
-- Everything it needs from the unrestricted globals it keeps in locals here, which no script can
-- reach (there is no debug library), and then the host empties the real globals. It returns three
-- values: the script environment, the top-level runner, and `bind(params, config)`, which the
-- host calls once with the run's own values (the state is made before its run is known).
--
-- The rules it enforces (see src/script/mod.rs for the whole design):
--   * catching functions (pcall, xpcall, coroutine.resume, coroutine.close) re-raise a run's
--     interruption (deadline, cancel) after they return, so `pcall` cannot swallow a timeout;
--   * xpcall message handlers are skipped once the run is interrupted (Lua 5.4 runs handlers of
--     hook-raised errors with hooks off, so a looping handler could never be stopped);
--   * setmetatable refuses __gc (finalizers also run with hooks off);
--   * load takes text chunks only and runs them in the script's environment;
--   * `tools` is a read-only proxy whose functions all go through the gate.

local api = ...

local G = _G
local raw_pcall, raw_xpcall, raw_load, raw_error = pcall, xpcall, load, error
local raw_setmetatable, raw_getmetatable, raw_rawset, raw_rawget = setmetatable, getmetatable, rawset, rawget
local raw_select, raw_type, raw_tostring, raw_pairs, raw_ipairs = select, type, tostring, pairs, ipairs
local raw_collect, raw_next = collectgarbage, next
local co_create, co_resume, co_close = coroutine.create, coroutine.resume, coroutine.close
local co_status = coroutine.status
local concat, pack, unpack = table.concat, table.pack, table.unpack
local check, interrupted = api.check, api.interrupted

local env = {}

for _, name in raw_ipairs({
  "assert", "error", "getmetatable", "ipairs", "next", "pairs", "rawequal", "rawget", "rawlen",
  "select", "tonumber", "tostring", "type", "_VERSION",
}) do
  env[name] = G[name]
end

-- Catching functions ---------------------------------------------------------------------------

env.pcall = function(f, ...)
  return check(raw_pcall(f, ...))
end

env.xpcall = function(f, handler, ...)
  if raw_type(handler) ~= "function" then
    raw_error("bad argument #2 to 'xpcall' (function expected, got " .. raw_type(handler) .. ")", 2)
  end
  return check(raw_xpcall(f, function(e)
    if interrupted() then
      return e
    end
    return handler(e)
  end, ...))
end

local co = {}
for k, v in raw_pairs(coroutine) do
  co[k] = v
end
-- A coroutine killed by the hook's error has hooks off for good (the error left them off in that
-- coroutine), and Lua would run each of its `__close` there, where nothing could stop a loop. So
-- a coroutine may be closed only when the last resume that returned said it was not stopped:
-- the mark is cleared before each resume and set after it returns, so an interruption anywhere
-- in between (even in the resumer, before the mark is set) leaves it unclosable. This holds
-- across REPL lines, where the interruption itself is cleared. `wrap` is built on resume, which
-- does not close on error (C's wrap does). A to-be-closed value anywhere else is closed with
-- hooks on: `pcall` and the top-level call restore them before closing.
local closable = raw_setmetatable({}, { __mode = "k" })
local function resumed(c, ok, ...)
  if raw_type(c) == "thread" and (ok or not interrupted()) then
    closable[c] = true
  end
  return check(ok, ...)
end
local function resume(c, ...)
  if raw_type(c) == "thread" then
    closable[c] = nil
  end
  return resumed(c, co_resume(c, ...))
end
co.create = function(f)
  local c = co_create(f)
  closable[c] = true
  return c
end
co.resume = resume
co.close = function(c)
  local status = raw_type(c) == "thread" and co_status(c)
  if (status == "dead" or status == "suspended") and not closable[c] then
    check()
    raw_error("cannot close a coroutine stopped by its run's deadline or cancellation", 2)
  end
  return check(co_close(c))
end
local table_pack, table_unpack = table.pack, table.unpack
co.wrap = function(f)
  local c = co.create(f)
  return function(...)
    local r = table_pack(resume(c, ...))
    if r[1] then
      return table_unpack(r, 2, r.n)
    end
    local e = r[2]
    if co_status(c) == "dead" and closable[c] then
      -- an ordinary error: close what it held, with hooks on; as in C's wrap, an error while
      -- closing replaces the first
      local closed, close_error = check(co_close(c))
      if not closed then
        e = close_error
      end
    end
    raw_error(e, 0)
  end
end
env.coroutine = co

-- Metatables, raw access, loading, memory -------------------------------------------------------

local protected = raw_setmetatable({}, { __mode = "k" })

-- The metatables the host hands out are closed: getmetatable gives a name, not the table, so
-- no script can add __gc to them (json.array's, the strings').
raw_rawset(api.array_mt, "__metatable", "array")
do
  local string_mt = raw_getmetatable("")
  if string_mt then
    raw_rawset(string_mt, "__metatable", "string")
  end
end

-- __gc finalizers run where Lua runs no hooks, so nothing there could stop a loop: no metatable
-- in the sandbox may hold one, neither when it is set nor later. Metatables in use are
-- remembered, and adding __gc to one is refused, by assignment (a __newindex guard) or by
-- rawset.
local in_use = raw_setmetatable({}, { __mode = "k" })
local forbidden = { __gc = true }

-- The guard lives in a metatable of the metatable that scripts cannot reach (`__metatable`
-- hides it), copied from any metatable it already had, so the guard can be neither replaced
-- nor removed.
local function guard(mt)
  if in_use[mt] then
    return
  end
  local their = raw_getmetatable(mt)
  local hidden = {}
  if raw_type(their) == "table" then
    for k, v in raw_pairs(their) do
      hidden[k] = v
    end
  elseif their ~= nil then
    raw_error("setmetatable: this metatable's own metatable is protected", 3)
  end
  local inner = hidden.__newindex
  hidden.__newindex = function(m, k, v)
    if forbidden[k] then
      raw_error("setmetatable: " .. k .. " metamethods are not allowed in the sandbox", 2)
    end
    if raw_type(inner) == "function" then
      return inner(m, k, v)
    elseif raw_type(inner) == "table" then
      inner[k] = v
      return
    end
    raw_rawset(m, k, v)
  end
  if hidden.__metatable == nil then
    hidden.__metatable = false
  end
  if not raw_pcall(raw_setmetatable, mt, hidden) then
    raw_error("setmetatable: this metatable's own metatable is protected", 3)
  end
  in_use[mt] = true
end

env.setmetatable = function(t, mt)
  if raw_type(mt) == "table" then
    for key in raw_pairs(forbidden) do
      if raw_rawget(mt, key) ~= nil then
        raw_error("setmetatable: " .. key .. " metamethods are not allowed in the sandbox", 2)
      end
    end
  end
  if protected[t] then
    raw_error("setmetatable: this table is read-only", 2)
  end
  if in_use[t] then
    raw_error("setmetatable: this table is already a metatable; give it its own metatable "
      .. "before using it as one", 2)
  end
  -- guarded first: should the guard fail (a metatable whose own metatable is protected), the
  -- table is left as it was
  if raw_type(mt) == "table" then
    guard(mt)
  end
  return raw_setmetatable(t, mt)
end

env.rawset = function(t, k, v)
  if protected[t] then
    raw_error("rawset: this table is read-only", 2)
  end
  if in_use[t] and forbidden[k] then
    raw_error("rawset: " .. k .. " metamethods are not allowed in the sandbox", 2)
  end
  return raw_rawset(t, k, v)
end

env.load = function(chunk, name, mode, chunk_env)
  if mode ~= nil and mode ~= "t" then
    return nil, "only text chunks can be loaded (mode \"t\")"
  end
  if chunk_env == nil then
    chunk_env = env
  end
  if raw_type(chunk) == "function" then
    -- Read the whole chunk first, so it can be checked like any other.
    local parts = {}
    while true do
      local piece = chunk()
      if piece == nil or piece == "" then
        break
      end
      if raw_type(piece) ~= "string" then
        return nil, "reader function must return a string"
      end
      parts[#parts + 1] = piece
    end
    chunk = concat(parts)
  end
  if raw_type(chunk) == "string" then
    local refused = api.source_check(chunk, name)
    if refused then
      return nil, refused
    end
  end
  return raw_load(chunk, name, "t", chunk_env)
end

env.collectgarbage = function(opt)
  if opt == "count" then
    return raw_collect("count")
  end
  raw_error("collectgarbage: only \"count\" is available in the sandbox", 2)
end

-- Libraries ------------------------------------------------------------------------------------

-- Guarded versions of the functions that can run unbounded inside one C call.
local raw_rep = string.rep
string.rep = function(s, n, sep)
  if raw_type(s) == "string" and #s == 0 and (sep == nil or (raw_type(sep) == "string" and #sep == 0)) then
    return ""
  end
  return raw_rep(s, n, sep)
end
string.dump = nil
string.find = api.patterns.find
string.match = api.patterns.match
string.gmatch = api.patterns.gmatch
string.gsub = api.patterns.gsub
env.string = string

-- table.move loops in C over any index range; this version runs as Lua, under the hooks.
table.move = function(a1, f, e, t, a2)
  if a2 == nil then
    a2 = a1
  end
  if raw_type(f) ~= "number" or raw_type(e) ~= "number" or raw_type(t) ~= "number" then
    raw_error("bad argument to 'move' (number expected)", 2)
  end
  if e >= f then
    if t > e or t <= f or a1 ~= a2 then
      for i = 0, e - f do
        a2[t + i] = a1[f + i]
      end
    else
      for i = e - f, 0, -1 do
        a2[t + i] = a1[f + i]
      end
    end
  end
  return a2
end

-- table.insert, remove and concat loop in C up to the length `__len` claims, touching elements
-- through `__index`/`__newindex`; none of that runs a Lua instruction when the metamethods are C
-- functions, so the hook could never stop it. On a table with a metatable they run as Lua, under
-- the hooks; on a plain table the length is bounded by memory and C's versions run.
local c_insert, c_remove, c_concat, c_sort = table.insert, table.remove, table.concat, table.sort
local to_integer = math.tointeger

local function has_metatable(t)
  return raw_type(t) == "table" and raw_getmetatable(t) ~= nil
end

local function length(t)
  local n = to_integer(#t)
  if n == nil then
    raw_error("object length is not an integer", 3)
  end
  return n
end

local function position(v, arg, name)
  local n = to_integer(v)
  if n == nil then
    raw_error("bad argument #" .. arg .. " to '" .. name .. "' (number has no integer representation)", 3)
  end
  return n
end

table.insert = function(t, ...)
  if not has_metatable(t) then
    return c_insert(t, ...)
  end
  local nargs = raw_select("#", ...)
  local e = length(t) + 1
  if nargs == 1 then
    t[e] = ...
    return
  elseif nargs ~= 2 then
    raw_error("wrong number of arguments to 'insert'", 2)
  end
  local pos, value = ...
  pos = position(pos, 2, "insert")
  if pos < 1 or pos > e then
    raw_error("bad argument #2 to 'insert' (position out of bounds)", 2)
  end
  for i = e, pos + 1, -1 do
    t[i] = t[i - 1]
  end
  t[pos] = value
end

table.remove = function(t, pos)
  if not has_metatable(t) then
    if pos == nil then
      return c_remove(t)
    end
    return c_remove(t, pos)
  end
  local size = length(t)
  if pos == nil then
    pos = size
  else
    pos = position(pos, 2, "remove")
    if pos ~= size and (pos < 1 or pos - 1 > size) then
      raw_error("bad argument #2 to 'remove' (position out of bounds)", 2)
    end
  end
  local removed = t[pos]
  while pos < size do
    t[pos] = t[pos + 1]
    pos = pos + 1
  end
  t[pos] = nil
  return removed
end

table.concat = function(t, sep, i, j)
  if not has_metatable(t) then
    return c_concat(t, sep, i, j)
  end
  i = i == nil and 1 or position(i, 3, "concat")
  j = j == nil and length(t) or position(j, 4, "concat")
  local parts = {}
  for k = i, j do
    local v = t[k]
    local kind = raw_type(v)
    if kind ~= "string" and kind ~= "number" then
      raw_error("invalid value (at index " .. k .. ") in table for 'concat'", 2)
    end
    parts[k - i + 1] = v
  end
  return c_concat(parts, sep)
end

-- table.sort compares in C: with a C comparator, C metamethods or a metatable's `__len`, no Lua
-- instruction may run for the whole sort. Comparisons go through a Lua function (each call is a
-- chance for the hook), except for a plain list of only numbers, or of only strings of at most
-- 16 MiB together, whose C sort needs no calls and little time (one long string repeated would
-- make every comparison long).
local SORT_FAST_BYTES = 16 * 1024 * 1024
local function plain_list(t)
  if raw_type(t) ~= "table" or raw_getmetatable(t) ~= nil then
    return false
  end
  local n = #t
  if n == 0 then
    return true
  end
  local kind = raw_type(raw_rawget(t, 1))
  if kind ~= "number" and kind ~= "string" then
    return false
  end
  local bytes = 0
  for k = 1, n do
    local v = raw_rawget(t, k)
    if raw_type(v) ~= kind then
      return false
    end
    if kind == "string" then
      bytes = bytes + #v
      if bytes > SORT_FAST_BYTES then
        return false
      end
    end
  end
  return true
end

-- (its errors read "table.sort:1: attempt to compare ...", not a line of this file)
local default_less = raw_load("local a, b = ... return a < b", "=table.sort", "t", {})

table.sort = function(t, comp)
  if comp == nil then
    if plain_list(t) then
      return c_sort(t)
    end
    return c_sort(t, default_less)
  end
  if raw_type(comp) ~= "function" then
    raw_error("bad argument #2 to 'sort' (function expected, got " .. raw_type(comp) .. ")", 2)
  end
  return c_sort(t, function(a, b)
    return comp(a, b)
  end)
end
env.table = table
env.math = math
env.utf8 = utf8
env.os = { time = os.time, date = os.date, clock = os.clock }

-- Output and logging ---------------------------------------------------------------------------

local function joined(...)
  local n = raw_select("#", ...)
  local parts = {}
  for i = 1, n do
    parts[i] = raw_tostring((raw_select(i, ...)))
  end
  return concat(parts, "\t")
end

env.print = function(...)
  api.write(joined(...) .. "\n")
end

env.log = {
  info = function(...) api.log("info", joined(...)) end,
  warn = function(...) api.log("warn", joined(...)) end,
  error = function(...) api.log("error", joined(...)) end,
}

env.sleep = api.sleep

-- JSON -----------------------------------------------------------------------------------------

-- A value JSON cannot hold, or text that is not JSON, is a plain message raised at the
-- script's line (running out of memory stays a memory error).
local function raising(f)
  return function(...)
    local ok, result = f(...)
    if ok then
      return result
    end
    raw_error(result, 2)
  end
end
env.json = {
  encode = raising(api.json_encode),
  decode = raising(api.json_decode),
  null = api.null,
  -- Marks a table as a list, so an empty one encodes as [] rather than {}.
  array = function(t)
    if t == nil then
      t = {}
    end
    return raw_setmetatable(t, api.array_mt)
  end,
}

-- Tools ----------------------------------------------------------------------------------------

local tool_error_mt = {
  __name = "ToolError",
  -- getmetatable(e) gives this name, never the table: nobody can add __gc to it.
  __metatable = "ToolError",
  __tostring = function(e)
    local code = raw_tostring(raw_rawget(e, "code"))
    local message = raw_tostring(raw_rawget(e, "message"))
    -- a nested program's failure already names its cause: each level adding its own
    -- `script_error: ` would repeat it once per level
    if code == "script_error" then
      return message
    end
    return code .. ": " .. message
  end,
}


-- The error values tools.NAME raised, each with its code as the gate gave it (a script may
-- change the table's fields), so that the runner can say which uncaught error was a tool's
-- refusal. Weak: an error caught and dropped is not kept.
local raised = raw_setmetatable({}, { __mode = "k" })
-- Where in the script each of those was raised (`chunk.lua:4: `): an error table carries no
-- position, so an uncaught one is told with the line of the call that failed. Without a
-- debug library, the position is what `error` at the caller's level would have prefixed.
local raised_at = raw_setmetatable({}, { __mode = "k" })

local tool_functions = {}
local tools = raw_setmetatable({}, {
  __index = function(_, name)
    if raw_type(name) ~= "string" then
      return nil
    end
    local f = tool_functions[name]
    if f then
      return f
    end
    if not api.tool_exists(name) then
      raw_error(api.unknown_tool(name), 2)
    end
    -- one Lua call per tool call (every call runs the sandbox's hook): `call` takes nil for
    -- no arguments, and refuses what is not a table with a message, raised here so that it
    -- names the script's line
    local call = api.call
    f = function(args)
      local ok, result = call(name, args)
      if ok then
        return result
      end
      if raw_type(result) == "string" then
        raw_error(result, 2)
      end
      raised[result] = raw_rawget(result, "code")
      local _, where = raw_pcall(raw_error, "", 3)
      raised_at[result] = where
      raw_error(raw_setmetatable(result, tool_error_mt), 2)
    end
    tool_functions[name] = f
    return f
  end,
  __newindex = function()
    raw_error("tools is read-only", 2)
  end,
  __metatable = false,
})
protected[tools] = true
env.tools = tools

env.lmcp = {
  version = api.version,
  tools = api.tool_list,
  has_tool = api.tool_exists,
  previews = api.previews,
}

-- The run's own values: the state is made before its run is known (on another core while the
-- command line is read), so they come last, once, from the host.
local function bind(params, config)
  env.params = params
  -- A skill's configuration: read-only, so a script cannot change what the next run sees.
  if config ~= nil then
    local values = config
    env.config = raw_setmetatable({}, {
      __index = values,
      __newindex = function()
        raw_error("config is read-only; change it with `lmcp skill config`", 2)
      end,
      -- the walk goes through a closure: the values table itself stays out of reach
      __pairs = function()
        return function(_, k)
          return raw_next(values, k)
        end, nil, nil
      end,
      __metatable = false,
    })
    protected[env.config] = true
  end
end

-- Modules --------------------------------------------------------------------------------------

local loaded = {}
env.require = function(name)
  if raw_type(name) ~= "string" then
    raw_error("bad argument #1 to 'require' (string expected, got " .. raw_type(name) .. ")", 2)
  end
  local value = loaded[name]
  if value ~= nil then
    return value
  end
  local source, chunkname = api.module_source(name)
  if source == nil then
    raw_error(chunkname, 2)
  end
  local f, err = raw_load(source, chunkname, "t", env)
  if not f then
    raw_error(err, 2)
  end
  value = f(name)
  if value == nil then
    value = true
  end
  loaded[name] = value
  return value
end

env._G = env

-- The top-level runner: runs a chunk and turns an uncaught error into one readable string,
-- and the code of the tool error it was, when it was one (`denied` ends `lmcp run` with the
-- exit code of a refusal).
local uncaught_code, described

local function text_of(e)
  if interrupted() then
    return e
  end
  if raw_type(e) == "string" then
    return e
  end
  local ok, text = raw_pcall(raw_tostring, e)
  if ok and raw_type(text) == "string" then
    return text
  end
  return "(an error value that cannot be shown: " .. raw_type(e) .. ")"
end

local function describe(e)
  local where = raised_at[e]
  described = text_of(e)
  if raw_type(where) == "string" and not interrupted() then
    described = where .. described
  end
  uncaught_code = raised[e]
  return described
end

local function finish(ok, ...)
  if ok then
    return ok, ...
  end
  local e = ...
  if e ~= described then
    -- an error raised while unwinding (a `__close`) replaced the one described
    uncaught_code = nil
  end
  return false, e, uncaught_code
end

local function run(f, ...)
  uncaught_code, described = nil, nil
  return finish(raw_xpcall(f, describe, ...))
end

return env, run, bind

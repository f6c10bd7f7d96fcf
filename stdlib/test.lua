--- test: check scripts offline, against mocked tools.
---
--- ```lua
--- local test = require("test")
--- local mock = test.mock({
---   calculate = function(args) return {expression = args.expression, value = 4} end,
---   write_file = {path = "out.txt", bytes = 1, replaced = false},  -- a fixed result
---   read_file = test.fails("io", "no such file"),                   -- a failing tool
--- })
--- -- run a recipe's source with these tools and params...
--- local result = mock.run(recipe_source, {name = "x"})
--- -- ...or a function that receives the mocked tools
--- mock.run(function(tools) return tools.calculate{expression = "2+2"}.value end)
--- test.called(mock, "calculate", {expression = "2+2"})
--- test.eq(#mock.calls, 2)
---
--- test.run({
---   ["adds"] = function() test.eq(1 + 1, 2) end,
---   ["fails"] = function() test.raises(function() error("boom") end, "boom") end,
--- })
--- ```
---
--- `test.run` prints `ok - name` or `not ok - name: why` per case and raises an error when any
--- failed, so `lmcp run my_test.lua` exits non-zero.

local test = {}

local function deep_eq(a, b, seen)
  if a == b then
    return true
  end
  if type(a) ~= "table" or type(b) ~= "table" then
    return false
  end
  seen = seen or {}
  if seen[a] == b then
    return true
  end
  seen[a] = b
  for k, v in pairs(a) do
    if not deep_eq(v, rawget(b, k), seen) then
      return false
    end
  end
  for k in pairs(b) do
    if rawget(a, k) == nil then
      return false
    end
  end
  return true
end
test.deep_eq = deep_eq

local function show(v)
  return require("inspect")(v)
end

function test.eq(actual, expected, message)
  if not deep_eq(actual, expected) then
    error((message and (message .. ": ") or "") .. "expected " .. show(expected) .. ", got " .. show(actual), 2)
  end
end

function test.truthy(v, message)
  if not v then
    error(message or ("expected a true value, got " .. show(v)), 2)
  end
end

function test.raises(f, pattern)
  local ok, err = pcall(f)
  if ok then
    error("expected an error, but none was raised", 2)
  end
  if pattern and not tostring(err):find(pattern) then
    error("expected an error matching " .. show(pattern) .. ", got " .. show(tostring(err)), 2)
  end
  return err
end

local error_mt = {
  __tostring = function(e)
    return tostring(e.code) .. ": " .. tostring(e.message)
  end,
}

--- A stub that fails like a real tool call: raises {code=, message=, tool=}.
function test.fails(code, message)
  return function(_, name)
    error(setmetatable({code = code, message = message, tool = name}, error_mt), 0)
  end
end

local function copy(v)
  if type(v) ~= "table" then
    return v
  end
  local out = {}
  for k, x in pairs(v) do
    out[k] = copy(x)
  end
  return out
end

--- Mocked tools: `stubs` maps tool names to a result table or a function(args, name).
function test.mock(stubs)
  if type(stubs) ~= "table" then
    error("test.mock: expected a table of stubs", 2)
  end
  local mock = {calls = {}}
  mock.tools = setmetatable({}, {
    __index = function(_, name)
      return function(args)
        mock.calls[#mock.calls + 1] = {tool = name, args = copy(args or {})}
        local stub = stubs[name]
        if stub == nil then
          error(setmetatable({code = "unknown_tool", message = "no stub for tool `" .. tostring(name)
            .. "`; add one to test.mock{...}", tool = name}, error_mt), 2)
        end
        if type(stub) == "function" then
          return stub(args or {}, name)
        end
        return copy(stub)
      end
    end,
    __newindex = function()
      error("tools is read-only", 2)
    end,
  })
  function mock.run(program, params)
    if type(program) == "function" then
      return program(mock.tools, params or {})
    end
    if type(program) ~= "string" then
      error("mock.run: expected Lua source or a function", 2)
    end
    local env = setmetatable({tools = mock.tools, params = params or {}}, {__index = _G})
    local chunk, err = load(program, "=program", "t", env)
    if not chunk then
      error("mock.run: " .. err, 2)
    end
    return chunk()
  end
  return mock
end

--- Asserts the mock saw a call of `name` (with exactly `args`, when given).
function test.called(mock, name, args)
  for _, c in ipairs(mock.calls) do
    if c.tool == name and (args == nil or deep_eq(c.args, args)) then
      return c
    end
  end
  local seen = {}
  for _, c in ipairs(mock.calls) do
    seen[#seen + 1] = c.tool .. " " .. show(c.args)
  end
  error("expected a call of " .. name .. (args and (" with " .. show(args)) or "")
    .. "; calls made: " .. (#seen > 0 and table.concat(seen, "; ") or "none"), 2)
end

--- Runs named test cases; prints one line per case; raises if any failed.
function test.run(cases)
  local names = {}
  for name in pairs(cases) do
    names[#names + 1] = name
  end
  table.sort(names)
  local passed, failed = 0, 0
  for _, name in ipairs(names) do
    local ok, err = pcall(cases[name])
    if ok then
      passed = passed + 1
      print("ok - " .. name)
    else
      failed = failed + 1
      print("not ok - " .. name .. ": " .. tostring(err))
    end
  end
  print(string.format("%d passed, %d failed", passed, failed))
  if failed > 0 then
    error(failed .. " test(s) failed", 0)
  end
  return {passed = passed, failed = failed}
end

return test

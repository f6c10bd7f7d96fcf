local test = require("test")

local recipe = [[
local total = 0
for _, e in ipairs(params.items) do
  local r = tools.calculate{expression = e}
  total = total + r.value
end
if total > 10 then
  tools.write_file{path = "big.txt", content = tostring(total)}
end
return total
]]

test.run({
  ["a recipe runs against stubs"] = function()
    local mock = test.mock({
      calculate = function(args) return {expression = args.expression, value = 6} end,
      write_file = {path = "big.txt", bytes = 2, replaced = false},
    })
    test.eq(mock.run(recipe, {items = {"1+5", "2*3"}}), 12)
    test.eq(#mock.calls, 3)
    test.called(mock, "calculate", {expression = "2*3"})
    test.called(mock, "write_file", {path = "big.txt", content = "12"})
  end,
  ["the conditional branch not taken makes no call"] = function()
    local mock = test.mock({calculate = {value = 1}})
    test.eq(mock.run(recipe, {items = {"x"}}), 1)
    test.raises(function() test.called(mock, "write_file") end, "calls made: calculate")
  end,
  ["a stub can fail like a tool"] = function()
    local mock = test.mock({calculate = test.fails("tool_error", "boom")})
    local ok, err = pcall(mock.run, function(tools) return tools.calculate{} end)
    test.eq(ok, false)
    test.eq((err --[[@as ToolError]]).code, "tool_error")
    test.eq(tostring(err), "tool_error: boom")
  end,
  ["a missing stub says how to add it"] = function()
    local mock = test.mock({})
    test.raises(function() mock.run(function(tools) tools.read_file{} end) end, "no stub for tool `read_file`")
  end,
  ["eq compares deeply and explains"] = function()
    test.eq({a = {1, 2}}, {a = {1, 2}})
    test.raises(function() test.eq({a = 1}, {a = 2}) end, "expected { a = 2 }, got { a = 1 }")
  end,
})

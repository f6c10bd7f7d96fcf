local test = require("test")
local inspect = require("inspect")

test.run({
  ["scalars"] = function()
    test.eq(inspect(1), "1")
    test.eq(inspect("a\n"), '"a\\n"')
    test.eq(inspect(nil), "nil")
    test.eq(inspect(json.null), "null")
  end,
  ["lists then sorted keys"] = function()
    test.eq(inspect({1, 2, b = true, a = "x"}), '{ 1, 2, a = "x", b = true }')
    test.eq(inspect({}), "{}")
    test.eq(inspect({["not id"] = 1}), '{ ["not id"] = 1 }')
  end,
  ["cycles and depth"] = function()
    local t = {}
    t.self = t
    test.eq(inspect(t), "{ self = <cycle> }")
    test.eq(inspect({a = {b = {c = 1}}}, {depth = 2}), "{ a = { b = {...} } }")
  end,
  ["indent"] = function()
    test.eq(inspect({a = 1, b = {2}}, {indent = "  "}), "{\n  a = 1,\n  b = {\n    2\n  }\n}")
  end,
  ["bad options"] = function()
    test.raises(function() inspect({}, {depth = "deep"}) end, "depth must be a number")
  end,
})

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
  ["width: one line when it fits, else a line per entry"] = function()
    local v = {a = 1, b = {2, 3}, c = {d = "x"}}
    test.eq(inspect(v, {width = 80}), '{ a = 1, b = { 2, 3 }, c = { d = "x" } }')
    test.eq(inspect(v, {width = 20}), '{\n  a = 1,\n  b = { 2, 3 },\n  c = { d = "x" }\n}')
    test.eq(inspect(v, {width = 12}),
      '{\n  a = 1,\n  b = {\n    2,\n    3\n  },\n  c = {\n    d = "x"\n  }\n}')
    test.eq(inspect({[{}] = 1, ["a b"] = {1, 2}}, {width = 10, indent = "\t"}),
      '{\n\t["a b"] = {\n\t\t1,\n\t\t2\n\t},\n\t[{}] = 1\n}')
    -- a string longer than the line stays whole
    test.eq(inspect({"0123456789"}, {width = 8}), '{\n  "0123456789"\n}')
    test.eq(inspect("0123456789", {width = 4}), '"0123456789"')
  end,
  ["width: cycles shown, depth bounded"] = function()
    local t = {name = "loop"}
    t.self = t
    t.deep = {{{{"x"}}}}
    test.eq(inspect(t, {width = 16, depth = 3}),
      '{\n  deep = {\n    { {...} }\n  },\n  name = "loop",\n  self = <cycle>\n}')
  end,
  ["width: a long list goes a line per item"] = function()
    local big = {}
    for i = 1, 20000 do big[i] = i end
    local text = inspect({big}, {width = 40, depth = 2})
    test.eq(select(2, text:gsub("\n", "")), 20003)
  end,
  ["bad options"] = function()
    test.raises(function() inspect({}, {depth = "deep"}) end, "depth must be a number")
    test.raises(function() inspect({}, {width = 8.5}) end, "width must be an integer")
    test.raises(function() inspect({}, {indent = 2}) end, "indent must be a string")
  end,
})

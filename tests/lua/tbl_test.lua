local test = require("test")
local tbl = require("tbl")

test.run({
  ["map doubles"] = function()
    test.eq(tbl.map({1, 2, 3}, function(x) return x * 2 end), {2, 4, 6})
  end,
  ["map passes the index"] = function()
    test.eq(tbl.map({"a", "b"}, function(v, i) return v .. i end), {"a1", "b2"})
  end,
  ["filter keeps matches in order"] = function()
    test.eq(tbl.filter({1, 2, 3, 4, 5}, function(x) return x % 2 == 1 end), {1, 3, 5})
  end,
  ["reduce folds"] = function()
    test.eq(tbl.reduce({1, 2, 3}, function(a, x) return a + x end, 10), 16)
  end,
  ["keys and values are sorted by key"] = function()
    test.eq(tbl.keys({b = 1, a = 2, c = 3}), {"a", "b", "c"})
    test.eq(tbl.values({b = 1, a = 2}), {2, 1})
  end,
  ["contains and count"] = function()
    test.truthy(tbl.contains({"x", "y"}, "y"))
    test.truthy(not tbl.contains({"x"}, "z"))
    test.eq(tbl.count({a = 1, b = 2, 3}), 3)
  end,
  ["bad arguments are named"] = function()
    test.raises(function() tbl.map("nope", print) end, "tbl.map: expected a table")
    test.raises(function() tbl.filter({}, 5) end, "expected a function")
  end,
})

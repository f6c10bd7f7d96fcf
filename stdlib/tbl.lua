--- tbl: small helpers for lists and tables.
---
--- ```lua
--- local tbl = require("tbl")
--- tbl.map({1, 2, 3}, function(x) return x * 2 end)        --> {2, 4, 6}
--- tbl.filter({1, 2, 3, 4}, function(x) return x % 2 == 0 end) --> {2, 4}
--- tbl.keys({b = 1, a = 2})                                 --> {"a", "b"} (sorted)
--- tbl.values({b = 1, a = 2})                               --> {2, 1} (by sorted key)
--- tbl.contains({"x", "y"}, "y")                            --> true
--- tbl.reduce({1, 2, 3}, function(acc, x) return acc + x end, 0) --> 6
--- ```
--- Lists are read with ipairs (up to the first nil); results are new tables.

local tbl = {}

local function check(t, name, f)
  if type(t) ~= "table" then
    error("tbl." .. name .. ": expected a table, got " .. type(t), 3)
  end
  if f ~= nil and type(f) ~= "function" then
    error("tbl." .. name .. ": expected a function, got " .. type(f), 3)
  end
end

function tbl.map(t, f)
  check(t, "map", f)
  local out = {}
  for i, v in ipairs(t) do
    out[i] = f(v, i)
  end
  return out
end

function tbl.filter(t, pred)
  check(t, "filter", pred)
  local out = {}
  for i, v in ipairs(t) do
    if pred(v, i) then
      out[#out + 1] = v
    end
  end
  return out
end

function tbl.reduce(t, f, init)
  check(t, "reduce", f)
  local acc = init
  for i, v in ipairs(t) do
    acc = f(acc, v, i)
  end
  return acc
end

local function sorted_keys(t)
  local keys = {}
  for k in pairs(t) do
    keys[#keys + 1] = k
  end
  table.sort(keys, function(a, b)
    if type(a) == type(b) and (type(a) == "string" or type(a) == "number") then
      return a < b
    end
    return type(a) < type(b)
  end)
  return keys
end

function tbl.keys(t)
  check(t, "keys")
  return sorted_keys(t)
end

function tbl.values(t)
  check(t, "values")
  local out = {}
  for i, k in ipairs(sorted_keys(t)) do
    out[i] = t[k]
  end
  return out
end

function tbl.contains(t, value)
  check(t, "contains")
  for _, v in pairs(t) do
    if v == value then
      return true
    end
  end
  return false
end

function tbl.count(t)
  check(t, "count")
  local n = 0
  for _ in pairs(t) do
    n = n + 1
  end
  return n
end

return tbl

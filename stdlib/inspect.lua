--- inspect: a pretty printer for Lua values.
---
--- ```lua
--- local inspect = require("inspect")
--- print(inspect({name = "x", list = {1, 2, 3}}))
--- --> { list = { 1, 2, 3 }, name = "x" }
--- print(inspect(deep_table, {depth = 2, indent = "  "}))
--- ```
---
--- Keys are sorted, lists print as lists, cycles print as `<cycle>`, tables deeper than
--- `depth` (default 8) as `{...}`, `json.null` as `null`. With `indent`, nested tables go on
--- their own lines.

local function sort_keys(a, b)
  local ta, tb = type(a), type(b)
  if ta ~= tb then
    return ta < tb
  end
  if ta == "number" or ta == "string" then
    return a < b
  end
  return tostring(a) < tostring(b)
end

local function is_identifier(k)
  return type(k) == "string" and k:match("^[%a_][%w_]*$") ~= nil
end

local function render(v, opts, depth, seen, out, level)
  local t = type(v)
  if t == "string" then
    -- %q writes a newline as a backslash and a real newline; show it as \n instead.
    out[#out + 1] = (string.format("%q", v):gsub("\\\n", "\\n"))
  elseif v == json.null then
    out[#out + 1] = "null"
  elseif t ~= "table" then
    out[#out + 1] = tostring(v)
  elseif seen[v] then
    out[#out + 1] = "<cycle>"
  elseif depth >= opts.depth then
    out[#out + 1] = "{...}"
  else
    seen[v] = true
    local n = rawlen(v)
    local keys = {}
    for k in next, v do
      if not (math.type(k) == "integer" and k >= 1 and k <= n) then
        keys[#keys + 1] = k
      end
    end
    table.sort(keys, sort_keys)
    if n == 0 and #keys == 0 then
      out[#out + 1] = "{}"
      seen[v] = nil
      return
    end
    local nl, pad, close = " ", "", " "
    if opts.indent then
      nl = "\n"
      pad = string.rep(opts.indent, level + 1)
      close = "\n" .. string.rep(opts.indent, level)
    end
    out[#out + 1] = "{" .. nl
    local first = true
    local function sep()
      if not first then
        out[#out + 1] = "," .. nl
      end
      first = false
      out[#out + 1] = pad
    end
    for i = 1, n do
      sep()
      render(rawget(v, i), opts, depth + 1, seen, out, level + 1)
    end
    for _, k in ipairs(keys) do
      sep()
      if is_identifier(k) then
        out[#out + 1] = k .. " = "
      else
        out[#out + 1] = "["
        render(k, opts, depth + 1, seen, out, level + 1)
        out[#out + 1] = "] = "
      end
      render(rawget(v, k), opts, depth + 1, seen, out, level + 1)
    end
    out[#out + 1] = close .. "}"
    seen[v] = nil
  end
end

local function inspect(value, opts)
  opts = opts or {}
  if opts.depth ~= nil and type(opts.depth) ~= "number" then
    error("inspect: opts.depth must be a number", 2)
  end
  local o = { depth = opts.depth or 8, indent = opts.indent }
  local out = {}
  render(value, o, 0, {}, out, 0)
  return table.concat(out)
end

return inspect

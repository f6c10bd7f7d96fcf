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
--- their own lines. With `width`, a table stays on one line when it fits in that many columns,
--- else each of its entries goes on a line of its own (indented by `indent`, default two
--- spaces), and so on down: the REPL shows results so.
---
--- ```lua
--- print(inspect({name = "x", list = {1, 2, 3}}, {width = 20}))
--- --> {
--- -->   list = { 1, 2, 3 },
--- -->   name = "x"
--- --> }
--- ```

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

-- The text of a value that is not a table to open: nil when it is one.
local function scalar(v, opts, depth, seen)
  local t = type(v)
  if t == "string" then
    -- %q writes a newline as a backslash and a real newline; show it as \n instead.
    return (string.format("%q", v):gsub("\\\n", "\\n"))
  elseif v == json.null then
    return "null"
  elseif t ~= "table" then
    return tostring(v)
  elseif seen[v] then
    return "<cycle>"
  elseif depth >= opts.depth then
    return "{...}"
  elseif next(v) == nil then
    return "{}"
  end
  return nil
end

-- A table's list length and its other keys, sorted.
local function entries(v)
  local n = rawlen(v)
  local keys = {}
  for k in next, v do
    if not (math.type(k) == "integer" and k >= 1 and k <= n) then
      keys[#keys + 1] = k
    end
  end
  table.sort(keys, sort_keys)
  return n, keys
end

-- Writes `v` to `sink` (sink.put(text)); stops early once `sink.over` is set.
local function render(v, opts, depth, seen, sink, level)
  local s = scalar(v, opts, depth, seen)
  if s then
    sink.put(s)
    return
  end
  seen[v] = true
  local n, keys = entries(v)
  local nl, pad, close = " ", "", " "
  if opts.indent and not opts.width then
    nl = "\n"
    pad = string.rep(opts.indent, level + 1)
    close = "\n" .. string.rep(opts.indent, level)
  end
  sink.put("{" .. nl)
  local first = true
  local function sep()
    if not first then
      sink.put("," .. nl)
    end
    first = false
    sink.put(pad)
  end
  for i = 1, n do
    if sink.over then
      break
    end
    sep()
    render(rawget(v, i), opts, depth + 1, seen, sink, level + 1)
  end
  for _, k in ipairs(keys) do
    if sink.over then
      break
    end
    sep()
    if is_identifier(k) then
      sink.put(k .. " = ")
    else
      sink.put("[")
      render(k, opts, depth + 1, seen, sink, level + 1)
      sink.put("] = ")
    end
    render(rawget(v, k), opts, depth + 1, seen, sink, level + 1)
  end
  sink.put(close .. "}")
  seen[v] = nil
end

-- The one-line text of `v`, or nil when it is longer than `room` (given) bytes.
local function one_line(v, opts, depth, seen, room)
  local parts, used = {}, 0
  -- `over` is kept apart from `sink.over` (which `render` reads to stop early) so that the
  -- checks here are on a boolean the editors' flow analysis does not take for a constant
  local over = false ---@type boolean
  local sink = { over = false }
  function sink.put(text)
    used = used + #text
    if room and used > room then
      over = true
      sink.over = true
    elseif not over then
      parts[#parts + 1] = text
    end
  end
  render(v, opts, depth, seen, sink, 0)
  if over then
    return nil
  end
  return table.concat(parts)
end

-- `v` in at most `room` columns where it can be: on one line, else a line per entry.
local function fitted(v, opts, depth, seen, level, room)
  local line = one_line(v, opts, depth, seen, room)
  if line then
    return line
  end
  if scalar(v, opts, depth, seen) then
    -- a long string or the like: it is what it is
    return one_line(v, opts, depth, seen, nil)
  end
  seen[v] = true
  local n, keys = entries(v)
  local pad = string.rep(opts.indent, level + 1)
  local lines = {}
  for i = 1, n do
    local room_left = opts.width - #pad - 1
    lines[#lines + 1] = pad .. fitted(rawget(v, i), opts, depth + 1, seen, level + 1, room_left)
  end
  for _, k in ipairs(keys) do
    local key
    if is_identifier(k) then
      key = k .. " = "
    else
      key = "[" .. one_line(k, opts, depth + 1, seen, nil) .. "] = "
    end
    local room_left = opts.width - #pad - #key - 1
    lines[#lines + 1] = pad .. key .. fitted(rawget(v, k), opts, depth + 1, seen, level + 1, room_left)
  end
  seen[v] = nil
  return "{\n" .. table.concat(lines, ",\n") .. "\n" .. string.rep(opts.indent, level) .. "}"
end

local function inspect(value, opts)
  opts = opts or {}
  if opts.depth ~= nil and type(opts.depth) ~= "number" then
    error("inspect: opts.depth must be a number", 2)
  end
  if opts.width ~= nil and math.type(opts.width) ~= "integer" then
    error("inspect: opts.width must be an integer", 2)
  end
  if opts.indent ~= nil and type(opts.indent) ~= "string" then
    error("inspect: opts.indent must be a string", 2)
  end
  local o = { depth = opts.depth or 8, indent = opts.indent, width = opts.width }
  if o.width then
    o.indent = o.indent or "  "
    return fitted(value, o, 0, {}, 0, o.width)
  end
  return one_line(value, o, 0, {}, nil)
end

return inspect

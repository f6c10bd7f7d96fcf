--- retry: call a function again when it fails, waiting longer each time.
---
--- ```lua
--- local retry = require("retry")
--- -- any function: up to 3 attempts, waiting 0.5 s, then 1 s
--- local page = retry(function() return tools.read_file{path = "feed.json"} end)
--- -- a tool by name: refuses tools that change state and are not idempotent,
--- -- unless you say `non_idempotent = true` (a repeated send may send twice)
--- local r = retry.call("calculate", {expression = "2+2"}, {attempts = 5, delay = 0.1})
--- ```
---
--- Options: `attempts` (3), `delay` seconds before the second attempt (0.5), `backoff` factor
--- (2), `max_delay` (30), `retry_if(err, attempt)` to decide per error. Errors that cannot change
--- by waiting (denied, needs_confirmation, invalid_args, unknown_tool, unavailable, cancelled)
--- are never retried. The last error is raised when every attempt failed.

---@class retry
---@overload fun(f: function, opts?: {attempts?: integer, delay?: number, retry_if?: fun(err: any, attempt: integer): boolean}, ...: any): ...
local retry = {}

local FINAL = {
  denied = true,
  needs_confirmation = true,
  invalid_args = true,
  unknown_tool = true,
  unavailable = true,
  cancelled = true,
}

local function options(opts)
  opts = opts or {}
  if type(opts) ~= "table" then
    error("retry: options must be a table", 3)
  end
  local o = {
    attempts = opts.attempts or 3,
    delay = opts.delay or 0.5,
    backoff = opts.backoff or 2,
    max_delay = opts.max_delay or 30,
    retry_if = opts.retry_if,
  }
  if math.type(o.attempts) ~= "integer" or o.attempts < 1 then
    error("retry: attempts must be a whole number >= 1", 3)
  end
  if type(o.delay) ~= "number" or o.delay < 0 then
    error("retry: delay must be a number of seconds >= 0", 3)
  end
  return o
end

local function run(f, o, ...)
  local delay = o.delay
  local last
  for attempt = 1, o.attempts do
    local result = table.pack(pcall(f, ...))
    if result[1] then
      return table.unpack(result, 2, result.n)
    end
    last = result[2]
    local code = type(last) == "table" and rawget(last, "code") or nil
    if code ~= nil and FINAL[code] == true then
      error(last, 0)
    end
    if o.retry_if and not o.retry_if(last, attempt) then
      error(last, 0)
    end
    if attempt < o.attempts then
      sleep(delay)
      delay = math.min(delay * o.backoff, o.max_delay)
    end
  end
  error(last, 0)
end

--- Calls a tool by name with retries; refuses non-idempotent state-changing tools unless
--- `opts.non_idempotent` is true.
function retry.call(name, args, opts)
  if type(name) ~= "string" then
    error("retry.call: the tool name must be a string", 2)
  end
  local o = options(opts)
  local info = nil ---@type {effect: string, annotations: table}?
  for _, t in ipairs(lmcp.tools()) do
    if t.name == name then
      info = t
    end
  end
  if info == nil then
    error("retry.call: unknown tool `" .. name .. "`", 2)
  end
  if info.effect ~= "read" and not info.annotations.idempotentHint and not (opts and opts.non_idempotent) then
    error("retry.call: `" .. name .. "` changes state and is not idempotent, so a retry may repeat "
      .. "its effect; pass {non_idempotent = true} if that is safe", 2)
  end
  return run(function() return tools[name](args) end, o)
end

return setmetatable(retry, {
  __call = function(_, f, opts, ...)
    if type(f) ~= "function" then
      error("retry: expected a function, got " .. type(f), 2)
    end
    return run(f, options(opts), ...)
  end,
}) --[[@as retry]]

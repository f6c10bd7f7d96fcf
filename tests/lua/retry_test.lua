local test = require("test")
local retry = require("retry")

test.run({
  ["returns at the first success"] = function()
    local n = 0
    local v = retry(function() n = n + 1 if n < 3 then error("flaky") end return "ok", n end, {delay = 0})
    test.eq(v, "ok")
    test.eq(n, 3)
  end,
  ["raises the last error when every attempt fails"] = function()
    local n = 0
    test.raises(function()
      retry(function() n = n + 1 error("always " .. n, 0) end, {attempts = 2, delay = 0})
    end, "always 2")
    test.eq(n, 2)
  end,
  ["never retries errors that waiting cannot fix"] = function()
    local n = 0
    test.raises(function()
      retry(function() n = n + 1 error({code = "denied", message = "no"}) end, {delay = 0})
    end)
    test.eq(n, 1)
  end,
  ["retry_if decides"] = function()
    local n = 0
    test.raises(function()
      retry(function() n = n + 1 error("x") end, {delay = 0, retry_if = function() return false end})
    end)
    test.eq(n, 1)
  end,
  ["retry.call runs a real tool"] = function()
    test.eq(retry.call("calculate", {expression = "2+2"}, {delay = 0}).value, 4)
  end,
  ["retry.call refuses non-idempotent state changes unless told"] = function()
    test.raises(function() retry.call("run_command", {program = "true"}) end, "not idempotent")
  end,
  ["bad options are named"] = function()
    test.raises(function() retry(function() end, {attempts = 0}) end, "attempts must be")
    ---@diagnostic disable-next-line: param-type-mismatch
    test.raises(function() retry("nope") end, "expected a function")
  end,
})

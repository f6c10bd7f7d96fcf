---@name user_sum_squares
---@description Sum the squares of the whole numbers from 1 to n, skipping multiples of skip.
---@param n integer How many numbers (1-1000)
---@param skip? integer=0 Skip multiples of this number (0: skip none)
---@uses calculate
---@timeout 10
---@return {total: number, numbers_used: integer} the sum, and how many numbers it adds

if params.n < 1 or params.n > 1000 then
  error("n must be between 1 and 1000", 0)
end
local total = 0 ---@type number
local used = 0
for i = 1, params.n do
  if params.skip == 0 or i % params.skip ~= 0 then
    total = total + tools.calculate{expression = i .. "^2"}.value
    used = used + 1
  end
end
return {total = total, numbers_used = used}

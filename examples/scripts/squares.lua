---@name squares
---@description Sum the squares of 1..n with the calculate tool, and say which are even.
---@param n? integer=10 How many numbers
---@timeout 10

local total = 0 ---@type number
local evens = {}
for i = 1, params.n do
  local r = tools.calculate{expression = ("%d ^ 2"):format(i)}
  total = total + r.value
  if r.value % 2 == 0 then
    evens[#evens + 1] = r.value
  end
end
print(("the sum of the first %d squares is %d"):format(params.n, total))
return {total = total, even_squares = json.array(evens)}

---@name user_word_count
---@description Count the words of a text, or of a text file in the workspace, most frequent first.
---@param text? string The text to count (or give path)
---@param path? string A text file to count instead
---@param limit? integer=10 How many words to return
---@timeout 30
---@uses read_file

local tbl = require("tbl")

local text = params.text
if params.path then
  local ok, file = pcall(tools.read_file, {path = params.path})
  if not ok then
    error(("cannot read %s: %s"):format(params.path, (file --[[@as ToolError]]).message), 0)
  end
  text = file.content
end
if not text then
  error("give text or path", 0)
end

local counts = {}
for word in text:lower():gmatch("[%a']+") do
  counts[word] = (counts[word] or 0) + 1
end
local words = tbl.keys(counts)
table.sort(words, function(a, b)
  if counts[a] ~= counts[b] then
    return counts[a] > counts[b]
  end
  return a < b
end)
local top = {}
for i = 1, math.min(params.limit, #words) do
  top[i] = {word = words[i], count = counts[words[i]]}
end
return {total_words = tbl.reduce(tbl.values(counts), function(a, n) return a + n end, 0), top = json.array(top)}

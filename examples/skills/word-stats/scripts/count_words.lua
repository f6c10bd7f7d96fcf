---@description Count the words of a text or a workspace file, most frequent first.
---@param text? string The text to count
---@param path? string A text file in the workspace to count instead
---@param limit? integer=10 How many words to return
---@uses read_file
---@timeout 20
---@return {total_words: integer, distinct: integer, top: {word: string, count: integer}[]}

local words = require("words")

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

local counts, total = words.count(text, config.min_length, config.case == "fold")
return {total_words = total, distinct = #words.ranked(counts), top = json.array(words.top(counts, params.limit))}

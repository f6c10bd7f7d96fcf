---@description Helpers for count_words: splitting, counting and ranking words (a module).

local M = {}

function M.count(text, min_length, fold)
  local counts, total = {}, 0
  for word in text:gmatch("[%a']+") do
    if #word >= min_length then
      if fold then
        word = word:lower()
      end
      counts[word] = (counts[word] or 0) + 1
      total = total + 1
    end
  end
  return counts, total
end

function M.ranked(counts)
  local list = {}
  for w in pairs(counts) do
    list[#list + 1] = w
  end
  table.sort(list, function(a, b)
    if counts[a] ~= counts[b] then
      return counts[a] > counts[b]
    end
    return a < b
  end)
  return list
end

function M.top(counts, limit)
  local out = {}
  for i, w in ipairs(M.ranked(counts)) do
    if i > limit then
      break
    end
    out[i] = {word = w, count = counts[w]}
  end
  return out
end

return M

---@name Countdown notes
---@description Write one note per day for the next n days, skipping weekends, as a Lua recipe.
---@param days? integer=5 How many days ahead
---@param prefix? string=plan A prefix for the note names
---@uses get_datetime, write_file

local today = tools.get_datetime{}
local written = {}
for day = 1, params.days do
  local t = today.unix + day * 86400
  local weekday = os.date("!%A", t)
  if weekday ~= "Saturday" and weekday ~= "Sunday" then
    local path = ("%s/%s.md"):format(params.prefix, os.date("!%Y-%m-%d", t))
    local r = tools.write_file{path = path, content = "# " .. weekday .. "\n", overwrite = true}
    written[#written + 1] = r.preview and ("(planned) " .. path) or path
  end
end
return json.array(written)

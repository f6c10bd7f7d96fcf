---@description Write today's standup note (yesterday, today, blockers) for the configured team.
---@param yesterday string What was done yesterday
---@param today string What will be done today
---@param blockers? string What is in the way
---@uses get_datetime, write_file
---@return {path: string, written: boolean, can_post: boolean}

local now = tools.get_datetime{}
local lines = {
  ("# %s standup — %s %s"):format(config.team, now.weekday, now.date),
  "",
  "## Yesterday", params.yesterday, "",
  "## Today", params.today, "",
  "## Blockers", params.blockers or "none",
}
local path = ("%s/%s.md"):format(config.folder, now.date)
local written = tools.write_file{path = path, content = table.concat(lines, "\n") .. "\n", overwrite = true}
return {
  path = path,
  written = not written.preview,
  -- the token is a secret: say whether it is set, never what it is
  can_post = config.webhook_token ~= nil,
}

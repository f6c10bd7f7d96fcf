---@description Post today's standup note to the team's chat webhook, on the host this script names.
---@param date? string The note's date (YYYY-MM-DD; today when not given)
---@uses get_datetime, read_file, http_request
---@connect hooks.example.org
---@return {posted: boolean, status?: integer} status is absent in a dry run (nothing was sent)

-- The host is fixed here, and the gate holds the script to it: a path that tried to lead
-- elsewhere ("@other.org/x", ".other.org/x") names another host, which ---@connect refuses.
local path = config.webhook_path
if type(path) ~= "string" or path:sub(1, 1) ~= "/" then
  error("webhook_path must begin with `/`, like /hooks/standup")
end
if config.webhook_token == nil then
  error("set the webhook token first: lmcp skill config team-standup webhook_token=...")
end
local date = params.date or tools.get_datetime{}.date
local note = tools.read_file{path = ("%s/%s.md"):format(config.folder, date)}
local sent = tools.http_request{
  url = "https://hooks.example.org" .. path,
  method = "POST",
  headers = {Authorization = "Bearer " .. config.webhook_token},
  json = {text = note.content},
}
-- in a dry run the request is previewed, not sent: nothing came back
return {posted = sent.status ~= nil and sent.status < 300, status = sent.status}

---@name notes
---@description Write a note per topic into the workspace, keeping notes that already exist,
---@description then list what is there. State-changing calls are previewed unless you confirm.
---@param topics? array=["ideas", "todo", "reading"] Topics to write a note for
---@param overwrite? boolean=false Replace notes that already exist

local written, planned, kept = {}, {}, {}
for _, topic in ipairs(params.topics) do
  local path = "notes/" .. topic .. ".md"
  local ok, result = pcall(tools.write_file, {
    path = path,
    content = ("# %s\n\nStarted %s.\n"):format(topic, tools.get_datetime{}.date),
    overwrite = params.overwrite,
  })
  if ok and result.preview then
    planned[#planned + 1] = path -- a dry run: nothing was written
  elseif ok then
    written[#written + 1] = path
  elseif (result --[[@as ToolError]]).code == "refused" then
    kept[#kept + 1] = path -- it exists and overwrite is off
  else
    error(result) -- denied, not confirmed, ...: stop here
  end
end

local ok, listing = pcall(tools.list_dir, {path = "notes"})
if not ok then
  listing = {entries = {}} --[[@as list_dir_result]] -- no notes folder yet
end
local names = {}
for _, e in ipairs(listing.entries) do
  names[#names + 1] = e.name
end
return {
  written = json.array(written),
  planned = json.array(planned),
  kept = json.array(kept),
  now_in_notes = json.array(names),
}

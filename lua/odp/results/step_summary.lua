--- The Markdown summary odp appends to $GITHUB_STEP_SUMMARY (GitHub Actions shows it on the run's page):
-- one table row per record, board, model, point, result and the headline metrics (docs/ci.md).
local report = require("odp.results.report")
local schema = require("odp.results.schema")

local M = {}

-- Markdown table cells: a '|' or a line break would end the cell or the row.
local function cell(s) return (tostring(s):gsub("[|\\]", "\\%0"):gsub("[\r\n]+", " ")) end

--- Markdown text of records (ends with a blank line so a later append starts a new block).
function M.markdown(records)
  local failed = 0
  for _, r in ipairs(records) do if not (type(r) == "table" and r.ok) then failed = failed + 1 end end
  local out = { ("### odp: %d run(s), %d failed"):format(#records, failed), "",
    "| board | model | point | result | p50 | p90 | peak RSS |", "|---|---|---|---|--:|--:|--:|" }
  for _, r in ipairs(records) do
    r = schema.read(r) or {}
    local l, lat = report.labels(r), r.latency_ms or {}
    local result = r.ok and "ok" or ("**FAIL** " .. ((r.error and r.error.code) or "") .. " " ..
      ((r.error and r.error.message) or ""))
    out[#out + 1] = ("| %s | %s | %s | %s | %s | %s | %s |"):format(cell(l.board), cell(l.model),
      cell(l.point ~= "" and l.point or "-"), cell(result), report.duration(lat.p50), report.duration(lat.p90),
      r.peak_rss_kb and (r.peak_rss_kb .. " kB") or "-")
  end
  return table.concat(out, "\n") .. "\n\n"
end

return M

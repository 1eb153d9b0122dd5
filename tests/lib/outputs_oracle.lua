--- The oracle of odp's output comparison (issue 31, docs/outputs.md) for a run's record: each compared output's
-- metrics recomputed by numpy from the same two files (tests/lib/numcmp_oracle.py), the one check every suite
-- that compares runs uses (tests/lua/outputs_arch_test.lua, tests/lua/arm64_twin_test.lua).
--   require("outputs_oracle").check(T, rec.reference, ref_run_dir, run_dir)
local proc = require("odp.proc")
local json = require("odp.core.json")

local M = {}

--- Asserts (with T) that every output of reference (a record's `reference`) has numpy's metrics on
-- REF_DIR/outputs/output-I.bin against GOT_DIR/outputs/output-I.bin. Returns the outputs checked.
function M.check(T, reference, ref_dir, got_dir)
  local root = require("odp.host").root
  for i, e in ipairs(reference.outputs) do
    local f = ("/outputs/output-%d.bin"):format(e.index)
    local pr = assert(proc.run { "/usr/bin/python3", root .. "/tests/lib/numcmp_oracle.py", "compare",
      ref_dir .. f, got_dir .. f, e.dtype, timeout = 60 })
    local want = assert(json.decode(pr.stdout), pr.stderr)
    T.eq({ e.n, e.equal, e.nonfinite }, { want.n, want.equal, want.nonfinite }, ("output %d"):format(i - 1))
    T.eq(e.histogram, want.histogram)
    T.near(e.cosine, want.cosine, 1e-12)
    T.near(e.mean_abs_err, want.mean_abs_err, 1e-12)
    T.near(e.rmse, want.rmse, 1e-12)
    if want.max_abs_err ~= "inf" then T.near(e.max_abs_err, want.max_abs_err, 1e-12) end
  end
  return #reference.outputs
end

return M

-- The comparison --reference makes, as one command for bench/outputs_bench.lua: outputs_cmp.lua REF GOT
-- (float32) prints the metrics as JSON.
local tensors = require("odp.results.tensors")
local st = assert(require("odp.sys").stat(arg[1]))
local e = assert(tensors.compare_files(arg[2], arg[1], { index = 0, dtype = "float32", sizes = { st.size // 4 } }))
e.histogram = nil
print(require("odp.core.json").encode(e))

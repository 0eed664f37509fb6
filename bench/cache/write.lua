-- wrk script: one new tuning record per POST (each individually acknowledged), keys drawn from a
-- pool of 1000 so outcomes mix inserted/improved/kept. MODE=tessera posts to /v1/records;
-- MODE=anchor posts the same body to the anchor's bare insert route /v1/rec/<key>.
-- Env: MODE, TOKEN (tessera: a write token).
local mode = os.getenv("MODE") or "tessera"
local token = os.getenv("TOKEN")
local counter = 0
local tid = 0
local threads = {}

function setup(thread)
  thread:set("tid", #threads + 1)
  threads[#threads + 1] = thread
end

function init(args)
  math.randomseed(os.time() + tid * 7919)
end

function request()
  counter = counter + 1
  local k = math.random(1000)
  local median = 10 + math.random() * 1000
  local body = string.format(
    '{"key":{"family":"gemm","workload":"%016x","shape":[%d,%d,%d],"dtype":"f32","layout":"row",' ..
    '"target":"host","arch":"x86-64-v4","units":2},"provenance":{"tessera_version":"0.1.0",' ..
    '"llvm_version":"22.1.0","host":"bench-%d","user":"bench","created_at":"2025-01-31T12:00:00Z"},' ..
    '"config":{"MC":64,"NC":128,"MR":%d,"KC":%d},"status":"ok",' ..
    '"result":{"n":10,"median_us":%.3f,"p20_us":%.3f,"p80_us":%.3f,"gflops":10}}',
    k + 4096, 16 * (1 + k % 8), 32, 16, tid, tid % 15, counter % 60000, median, median * 0.99, median * 1.02)
  local headers = {["Content-Type"] = "application/json"}
  if mode == "tessera" then
    if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end
    return wrk.format("POST", "/v1/records", headers, body)
  end
  return wrk.format("POST", string.format("/v1/rec/%064x", k), headers, body)
end

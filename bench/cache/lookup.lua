-- wrk script: GET a random known key per request (the anchor README's lookup load).
-- Env: KEYS_FILE (one key id per line), PATH_PREFIX (default /v1/best/), TOKEN (optional bearer).
local keys = {}
local prefix = os.getenv("PATH_PREFIX") or "/v1/best/"
local headers = {}
local token = os.getenv("TOKEN")
if token and token ~= "" then headers["Authorization"] = "Bearer " .. token end

function init(args)
  for line in io.lines(os.getenv("KEYS_FILE")) do keys[#keys + 1] = line end
  math.randomseed(os.time() + math.floor(os.clock() * 1000000))
end

function request()
  return wrk.format("GET", prefix .. keys[math.random(#keys)], headers)
end

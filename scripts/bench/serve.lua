-- wrk script for scripts/bench/serve.sh: each thread POSTs single sentences from $SENTENCES
-- (one a line), in turn, each thread from a different starting line.
local sentences = {}
for line in io.lines(os.getenv("SENTENCES")) do
  sentences[#sentences + 1] = line
end
local counter = 0
local threads = {}

function setup(thread)
  thread:set("id", counter)
  counter = counter + 1
  table.insert(threads, thread)
end

local function escape(s)
  return (s:gsub('[%c"\\]', function(c)
    return string.format("\\u%04x", string.byte(c))
  end))
end

function init(args)
  next_line = 1 + (id * 997) % #sentences
  wrk.method = "POST"
  wrk.headers["Content-Type"] = "application/json"
end

function request()
  local body = '{"text": "' .. escape(sentences[next_line]) .. '"}'
  next_line = next_line % #sentences + 1
  return wrk.format(nil, "/tag", nil, body)
end

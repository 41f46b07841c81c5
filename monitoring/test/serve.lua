-- A stand-in for uhttpd in the monitoring tests (the host has no uhttpd):
-- serves GET /metrics on 127.0.0.1:PORT by running the exporter's own
-- command-line scrape (COMMAND...) for each request and sending its output
-- as the text format, one request per connection.
--
--   lua5.1 serve.lua PORT COMMAND...
local socket = require("socket")

local port = tonumber(arg[1])
local cmd = {}
for i = 2, #arg do cmd[#cmd + 1] = "'" .. arg[i]:gsub("'", "'\\''") .. "'" end
cmd = table.concat(cmd, " ")

local srv = assert(socket.bind("127.0.0.1", port))
while true do
  local c = srv:accept()
  if c then
    c:settimeout(10)
    local line = c:receive("*l")
    repeat
      local h = c:receive("*l")
    until not h or h == ""
    local path = line and line:match("^GET (%S+)")
    if path and path:match("^/metrics") then
      local p = io.popen(cmd)
      local body = p:read("*a")
      p:close()
      c:send("HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: " .. #body .. "\r\n\r\n" .. body)
    else
      c:send("HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n")
    end
    c:close()
  end
end

-- TEST-ONLY stand-in for luasocket, which the OpenWrt images do not ship.
-- OpenWrt's prometheus-node-exporter-lua loads luasocket only for
-- socket.gettime() (wall-clock seconds with a fraction, for its
-- node_scrape_collector_duration_seconds); this module gives exactly that
-- one function, from the image's nixio (gettimeofday(2)), and nothing else:
-- any other use of "socket" fails. vmtest/openwrt/check-monitoring.sh puts
-- it on the exporter's LUA_PATH only (/root/pscheck/mon/shim/socket.lua);
-- it is not installed on the image's own Lua path. See docs/monitoring.md.
local nixio = require("nixio")

return {
  gettime = function()
    local sec, usec = nixio.gettimeofday()
    return sec + usec / 1e6
  end,
}

/* Statistics graphs of the packet-steering collectd exec plugin
 * (/usr/libexec/packet-steering/collectd-softnet): per CPU, the receive
 * work of the softirq and what it dropped or left for later. */

'use strict';
'require baseclass';

return baseclass.extend({
	title: _('Packet steering'),

	rrdargs: function(graph, host, plugin, plugin_instance, dtype) {
		/* Both graphs are drawn for each CPU (plugin instance cpuN): LuCI
		 * renders a definition per plugin instance. Not per_instance:
		 * that is one graph per type instance, and it ignores
		 * data.instances. */
		var load = {
			title: "%H: Receive load on %pi",
			vlabel: "Packets/s",
			number_format: "%5.0lf",
			data: {
				types: [ "packets" ],
				instances: { packets: [ "processed", "rps_received" ] },
				options: {
					packets_processed: { title: "Processed", color: "0000ff", overlay: true },
					packets_rps_received: { title: "RPS wake-ups", color: "00aa00", overlay: true, noarea: true }
				}
			}
		};

		var drops = {
			title: "%H: Drops and squeezes on %pi",
			vlabel: "Events/s",
			number_format: "%5.1lf",
			data: {
				types: [ "packets", "derive" ],
				instances: { packets: [ "dropped", "flow_limit" ], derive: [ "time_squeeze" ] },
				options: {
					packets_dropped: { title: "Dropped (backlog full)", color: "ff0000", overlay: true },
					packets_flow_limit: { title: "Dropped (flow limit)", color: "ff8800", overlay: true, noarea: true },
					derive_time_squeeze: { title: "Time squeeze", color: "8800ff", overlay: true, noarea: true }
				}
			}
		};

		return [ load, drops ];
	}
});

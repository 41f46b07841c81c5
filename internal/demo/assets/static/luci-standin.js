/*
 * LuCI stand-in runtime for `packet-steering demo`. This is NOT LuCI.
 *
 * It implements only the part of LuCI's client API (luci.js, rpc.js, ui.js
 * of openwrt/luci) that view/packet-steering/overview.js uses, with the
 * same signatures and behaviour, so that the view runs unchanged here and
 * inside real LuCI:
 *
 *   - class loading by 'require' directives at the top of a view file
 *     (built in: baseclass, view, rpc, ui, poll), L.require(), L.env,
 *     L.hasViewPermission() (from L.env.nodespec, as luci.js)
 *   - Class.extend(), Class.isSubclass(), view.extend() with load(),
 *     render(), handleSaveApply(), handleSave(), handleReset(), addFooter()
 *   - E() (dom.create: attributes, event handlers, children; a string
 *     child becomes innerHTML, array items become text nodes), _(),
 *     String.prototype.format() with %s %d %f %%
 *   - rpc.declare() (params, expect, filter, reject) as JSON-RPC 2.0 POST
 *     to L.env.ubuspath, the uhttpd-mod-ubus protocol
 *   - poll.add(), poll.remove(), poll.start(), poll.stop(), poll.active()
 *   - ui.addNotification(), ui.addTimeLimitedNotification(),
 *     ui.createHandlerFn()
 *
 * Anything else is missing on purpose: a view that needs more fails here
 * with an error instead of silently depending on the stand-in.
 */
(function(window, document) {
	'use strict';

	var env = {};

	/* Classes: LuCI's Class.extend semantics (luci.js). */
	var Class = function() {};
	Class.extend = function(properties) {
		var props = {
			__base__: { value: this.prototype },
			__name__: { value: properties.__name__ || 'anonymous' }
		};
		var ClassConstructor = function() {
			if (!(this instanceof ClassConstructor))
				throw new TypeError('Constructor must not be called without "new"');
			if (typeof(this.__init__) == 'function')
				this.__init__.apply(this, arguments);
		};
		for (var key in properties)
			if (!props[key] && Object.prototype.hasOwnProperty.call(properties, key))
				props[key] = { value: properties[key], writable: true };
		ClassConstructor.prototype = Object.create(this.prototype, props);
		ClassConstructor.prototype.constructor = ClassConstructor;
		Object.assign(ClassConstructor, this);
		return ClassConstructor;
	};
	Class.isSubclass = function(c) {
		return (c != null && typeof(c) == 'function' && c.prototype instanceof this);
	};

	/* i18n: the demo is English only. */
	function translate(s) { return s; }

	/* String.prototype.format: the conversions the view uses. */
	if (typeof String.prototype.format != 'function') {
		String.prototype.format = function() {
			var args = arguments, n = 0;
			return String(this).replace(/%(\.(\d+))?([sdf%])/g, function(m, p, prec, conv) {
				if (conv == '%')
					return '%';
				if (n >= args.length)
					return m;
				var v = args[n++];
				switch (conv) {
				case 's': return (v == null) ? '' : String(v);
				case 'd': return Math.floor(+v || 0).toFixed(0);
				case 'f': return (prec != null) ? (+v || 0).toFixed(+prec) : String(+v || 0);
				}
			});
		};
	}

	/* DOM helpers: LuCI's dom.create/attr/append/content. */
	var dom = {
		elem: function(e) {
			return (e != null && typeof(e) == 'object' && 'nodeType' in e);
		},
		attr: function(node, key, val) {
			if (!this.elem(node))
				return null;
			var attr = null;
			if (typeof(key) === 'object' && key !== null)
				attr = key;
			else if (typeof(key) === 'string')
				attr = {}, attr[key] = val;
			for (key in attr) {
				if (!Object.prototype.hasOwnProperty.call(attr, key) || attr[key] == null)
					continue;
				switch (typeof(attr[key])) {
				case 'function':
					node.addEventListener(key, attr[key]);
					break;
				case 'object':
					node.setAttribute(key, JSON.stringify(attr[key]));
					break;
				default:
					node.setAttribute(key, attr[key]);
				}
			}
		},
		append: function(node, children) {
			if (!this.elem(node))
				return null;
			if (Array.isArray(children)) {
				for (var i = 0; i < children.length; i++)
					if (this.elem(children[i]))
						node.appendChild(children[i]);
					else if (children !== null && children !== undefined)
						node.appendChild(document.createTextNode('' + children[i]));
				return node.lastChild;
			}
			else if (typeof(children) === 'function') {
				return this.append(node, children(node));
			}
			else if (this.elem(children)) {
				return node.appendChild(children);
			}
			else if (children !== null && children !== undefined) {
				node.innerHTML = '' + children;
				return node.lastChild;
			}
			return null;
		},
		content: function(node, children) {
			if (!this.elem(node))
				return null;
			while (node.firstChild)
				node.removeChild(node.firstChild);
			return this.append(node, children);
		},
		parse: function(s) {
			var doc = new DOMParser().parseFromString('<body>' + s + '</body>', 'text/html');
			return doc.body.firstChild;
		},
		create: function() {
			var html = arguments[0], attr = arguments[1], data = arguments[2], elem;
			if (!(attr instanceof Object) || Array.isArray(attr))
				data = attr, attr = null;
			if (Array.isArray(html)) {
				elem = document.createDocumentFragment();
				for (var i = 0; i < html.length; i++)
					elem.appendChild(this.create(html[i]));
			}
			else if (this.elem(html)) {
				elem = html;
			}
			else if (html.charCodeAt(0) === 60) {
				elem = this.parse(html);
			}
			else {
				elem = document.createElement(html);
			}
			if (!elem)
				return null;
			this.attr(elem, attr);
			this.append(elem, data);
			return elem;
		}
	};

	function raise(type, fmt) {
		var msg = fmt ? String.prototype.format.apply(fmt, Array.prototype.slice.call(arguments, 2)) : null;
		var e = new Error(msg || 'Unspecified error');
		e.name = type || 'Error';
		throw e;
	}

	/* poll: LuCI.Poll, one tick a second, an entry runs every i ticks and
	 * never overlaps itself. */
	var Poll = {
		queue: [],
		add: function(fn, interval) {
			if (interval == null || interval <= 0)
				interval = env.pollinterval;
			if (isNaN(interval) || typeof(fn) != 'function')
				throw new TypeError('Invalid argument to LuCI.Poll.add()');
			for (var i = 0; i < this.queue.length; i++)
				if (this.queue[i].fn === fn)
					return false;
			this.queue.push({ r: true, i: interval >>> 0, fn: fn });
			if (this.tick != null && !this.active())
				this.start();
			return true;
		},
		remove: function(fn) {
			if (typeof(fn) != 'function')
				throw new TypeError('Invalid argument to LuCI.Poll.remove()');
			var len = this.queue.length;
			for (var i = len; i > 0; i--)
				if (this.queue[i - 1].fn === fn)
					this.queue.splice(i - 1, 1);
			if (!this.queue.length && this.stop())
				this.tick = 0;
			return (this.queue.length != len);
		},
		start: function() {
			if (this.active())
				return false;
			this.tick = 0;
			if (this.queue.length) {
				this.timer = window.setInterval(this.step, 1000);
				this.step();
				document.dispatchEvent(new CustomEvent('poll-start'));
			}
			return true;
		},
		stop: function() {
			if (!this.active())
				return false;
			document.dispatchEvent(new CustomEvent('poll-stop'));
			window.clearInterval(this.timer);
			delete this.timer;
			delete this.tick;
			return true;
		},
		step: function() {
			for (var i = 0, e = null; (e = Poll.queue[i]) != null; i++) {
				if ((Poll.tick % e.i) != 0 || !e.r)
					continue;
				e.r = false;
				Promise.resolve(e.fn()).finally((function() { this.r = true; }).bind(e));
			}
			Poll.tick = (Poll.tick + 1) % Math.pow(2, 32);
		},
		active: function() {
			return (this.timer != null);
		}
	};

	/* ui: notifications and handler wrapping as ui.js does them. */
	var ui = {
		addNotification: function(title, children /*, ... */) {
			var mc = document.querySelector('#maincontent') || document.body;
			var msg = E('div', {
				'class': 'alert-message fade-in',
				'style': 'display:flex',
				'transitionend': function(ev) {
					var node = ev.currentTarget;
					if (node.parentNode && node.classList.contains('fade-out'))
						node.parentNode.removeChild(node);
				}
			}, [
				E('div', { 'style': 'flex:10' }),
				E('div', { 'style': 'flex:1 1 auto; display:flex' }, [
					E('button', {
						'class': 'btn',
						'style': 'margin-left:auto; margin-top:auto',
						'click': function(ev) {
							var n = ev.target.closest('.alert-message');
							if (n && n.parentNode)
								n.parentNode.removeChild(n);
						}
					}, [ translate('Dismiss') ])
				])
			]);
			if (title != null)
				dom.append(msg.firstElementChild, E('h4', {}, title));
			dom.append(msg.firstElementChild, children);
			for (var i = 2; i < arguments.length; i++)
				msg.classList.add(arguments[i]);
			mc.insertBefore(msg, mc.firstElementChild);
			return msg;
		},
		/* As ui.js: a notification that fades out after timeout ms. */
		addTimeLimitedNotification: function(title, children, timeout /*, ... */) {
			var msg = ui.addNotification.apply(ui, [ title, children ].concat(Array.prototype.slice.call(arguments, 3)));
			msg.classList.add('time-limited');
			window.setTimeout(function() {
				if (msg.parentNode)
					msg.parentNode.removeChild(msg);
			}, (timeout > 0) ? timeout : 5000);
			return msg;
		},
		createHandlerFn: function(ctx, fn /*, ... */) {
			if (typeof(fn) == 'string')
				fn = ctx[fn];
			if (typeof(fn) != 'function')
				return null;
			var argOffset = arguments.length - 2;
			return Function.prototype.bind.apply(function() {
				var t = arguments[argOffset].currentTarget;
				t.classList.add('spinning');
				t.disabled = true;
				if (t.blur)
					t.blur();
				Promise.resolve(fn.apply(ctx, arguments)).finally(function() {
					t.classList.remove('spinning');
					t.disabled = false;
				});
			}, [ this ].concat(Array.prototype.slice.call(arguments, 2)));
		}
	};

	/* rpc: rpc.declare over uhttpd-mod-ubus JSON-RPC. */
	var rpcRequestID = 1;
	var rpcStatusText = [ 'Command OK', 'Invalid command', 'Invalid argument',
		'Method not found', 'Resource not found', 'No data received',
		'Permission denied', 'Request timeout', 'Not supported',
		'Unspecified error', 'Connection lost' ];
	var rpc = {
		getStatusText: function(code) {
			return translate(rpcStatusText[code] || 'Unknown error code');
		},
		getSessionID: function() {
			return env.sessionid || '00000000000000000000000000000000';
		},
		call: function(msg) {
			var ctl = new AbortController();
			var timer = window.setTimeout(function() { ctl.abort(); }, (env.rpctimeout || 20) * 1000);
			return window.fetch(env.ubuspath + '?' + Date.now(), {
				method: 'POST',
				headers: { 'Content-Type': 'application/json' },
				body: JSON.stringify(msg),
				credentials: 'same-origin',
				signal: ctl.signal
			}).finally(function() { window.clearTimeout(timer); });
		},
		handleCallReply: function(req, msg) {
			var type = Object.prototype.toString, ret = null;
			if (msg == null || typeof(msg) != 'object' || msg.jsonrpc != '2.0')
				raise('RPCError', 'RPC call to %s/%s returned invalid message frame', req.object, req.method);
			if (msg.error != null && typeof(msg.error) == 'object' && msg.error.code && msg.error.message)
				raise('RPCError', 'RPC call to %s/%s failed with error %d: %s',
					req.object, req.method, msg.error.code, msg.error.message || '?');
			if (Array.isArray(msg.result)) {
				if (req.raise && msg.result[0] !== 0)
					raise('RPCError', 'RPC call to %s/%s failed with ubus code %d: %s',
						req.object, req.method, msg.result[0], this.getStatusText(msg.result[0]));
				ret = (msg.result.length > 1) ? msg.result[1] : msg.result[0];
			}
			if (req.expect) {
				for (var key in req.expect) {
					if (ret != null && key != '')
						ret = ret[key];
					if (ret == null || type.call(ret) != type.call(req.expect[key]))
						ret = req.expect[key];
					break;
				}
			}
			if (typeof(req.filter) == 'function') {
				req.priv[0] = ret;
				req.priv[1] = req.params;
				ret = req.filter.apply(this, req.priv);
			}
			return ret;
		},
		declare: function(options) {
			var self = this;
			return function() {
				var args = Array.prototype.slice.call(arguments);
				var params = {}, p_off = 0;
				if (Array.isArray(options.params))
					for (p_off = 0; p_off < options.params.length; p_off++)
						params[options.params[p_off]] = args[p_off];
				var priv = [ undefined, undefined ];
				for (; p_off < args.length; p_off++)
					priv.push(args[p_off]);
				var req = {
					expect: options.expect, filter: options.filter, params: params,
					priv: priv, object: options.object, method: options.method,
					raise: options.reject
				};
				var msg = {
					jsonrpc: '2.0',
					id: rpcRequestID++,
					method: 'call',
					params: [ self.getSessionID(), options.object, options.method, params ]
				};
				return self.call(msg).then(function(res) {
					if (!res.ok)
						raise('RPCError', 'RPC call to %s/%s failed with HTTP error %d: %s',
							req.object, req.method, res.status, res.statusText || '?');
					return res.json();
				}).then(function(reply) {
					return self.handleCallReply(req, reply);
				});
			};
		}
	};

	/* view: LuCI.view. */
	var View = Class.extend({
		__name__: 'LuCI.view',
		__init__: function() {
			var vp = document.getElementById('view');
			dom.content(vp, E('div', { 'class': 'spinning' }, translate('Loading view…')));
			return Promise.resolve(this.load())
				.then(this.render.bind(this))
				.then((function(nodes) {
					var vp = document.getElementById('view');
					dom.content(vp, nodes);
					dom.append(vp, this.addFooter());
				}).bind(this)).catch(L.error);
		},
		load: function() {},
		render: function() {},
		handleSave: function(ev) { return Promise.resolve(); },
		handleSaveApply: function(ev, mode) { return this.handleSave(ev); },
		handleReset: function(ev) { return Promise.resolve(); },
		addFooter: function() {
			var footer = E([]);
			if (!(this.handleSaveApply || this.handleSave || this.handleReset))
				return footer;
			var saveApply = ui.createHandlerFn(this, 'handleSaveApply');
			footer.appendChild(E('div', { 'class': 'cbi-page-actions' }, [
				this.handleSaveApply ? E('button', {
					'class': 'btn cbi-button cbi-button-apply important',
					'click': function(ev) { return saveApply(ev, '0'); }
				}, [ translate('Save & Apply') ]) : '', ' ',
				this.handleSave ? E('button', {
					'class': 'cbi-button cbi-button-save',
					'click': ui.createHandlerFn(this, 'handleSave')
				}, [ translate('Save') ]) : '', ' ',
				this.handleReset ? E('button', {
					'class': 'cbi-button cbi-button-reset',
					'click': ui.createHandlerFn(this, 'handleReset')
				}, [ translate('Reset') ]) : ''
			]));
			return footer;
		}
	});

	var classes = { baseclass: Class, view: View, rpc: rpc, ui: ui, poll: Poll };
	var loading = {};

	function parseHeader(source) {
		var deps = [], re = /^\s*(?:\/\/[^\n]*\n|\/\*[\s\S]*?\*\/)*\s*(['"])([^'"\n]*)\1\s*;?/, m, rest = source;
		while ((m = re.exec(rest)) != null) {
			var d = /^require[ \t]+(\S+)(?:[ \t]+as[ \t]+([a-zA-Z_]\S*))?$/.exec(m[2]);
			if (d)
				deps.push({ name: d[1], as: d[2] || d[1].replace(/[^a-zA-Z0-9_]/g, '_') });
			else if (!/^use[ \t]+strict$/.test(m[2]))
				break;
			rest = rest.substring(m[0].length);
		}
		return deps;
	}

	var L = {
		env: env,
		/* luci.js: null when the view's ACL state is unknown, else
		 * whether the session may write what the view depends on. */
		hasViewPermission: function() {
			var ns = env.nodespec;
			if (ns == null || typeof(ns) != 'object' || !ns.satisfied)
				return null;
			return !ns.readonly;
		},
		Class: Class,
		dom: dom,
		raise: raise,
		error: function(e) {
			if (!(e instanceof Error))
				e = new Error(String(e));
			if (!e.reported) {
				ui.addNotification(e.name || translate('Runtime error'), E('pre', {}, [ e.message ]), 'danger');
				e.reported = true;
			}
			throw e;
		},
		require: function(name, from) {
			from = from || [];
			if (classes[name] != null)
				return Promise.resolve(classes[name]);
			if (loading[name] != null) {
				if (from.indexOf(name) != -1)
					raise('DependencyError', 'Circular dependency: "%s" depends on "%s"', name, from.join('" which depends on "'));
				return loading[name];
			}
			var url = env.base_url + '/' + name.replace(/\./g, '/') + '.js';
			loading[name] = window.fetch(url, { cache: 'no-store' }).then(function(res) {
				if (!res.ok)
					raise('NetworkError', 'HTTP error %d while loading class file "%s"', res.status, url);
				return res.text();
			}).then(function(source) {
				var deps = parseHeader(source);
				return Promise.all(deps.map(function(d) {
					if (classes[d.name] == null && !/^view\./.test(d.name))
						raise('DependencyError', 'The stand-in runtime has no class "%s" (it provides: %s)',
							d.name, Object.keys(classes).join(', '));
					return L.require(d.name, [ name ].concat(from));
				})).then(function(instances) {
					var argNames = [ 'window', 'document', 'L' ].concat(deps.map(function(d) { return d.as; }));
					var factory = Function.apply(null, argNames.concat([ source + '\n//# sourceURL=' + url ]));
					var cls = factory.apply(factory, [ window, document, L ].concat(instances));
					if (!Class.isSubclass(cls))
						raise('TypeError', '"%s" factory yields invalid constructor', name);
					var instance = new cls();
					classes[name] = instance;
					return instance;
				});
			});
			return loading[name];
		},
		boot: function(setenv) {
			Object.assign(env, setenv);
			var start = function() {
				Poll.start();
				L.require('view.' + env.view.replace(/\//g, '.')).catch(function(e) {
					if (!e.reported)
						ui.addNotification(e.name || translate('Runtime error'), E('pre', {}, [ e.message ]), 'danger');
				});
			};
			if (document.readyState == 'loading')
				document.addEventListener('DOMContentLoaded', start);
			else
				start();
		}
	};

	window.L = L;
	window.E = function() { return dom.create.apply(dom, arguments); };
	window._ = translate;
})(window, document);

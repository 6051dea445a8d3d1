// Strata's portal: the pools, the compositions, a form to compose, a
// button to release, usage per tenant, all through the composer's
// Redfish API (docs/composer.md) with the token given at sign-in. No
// framework, no build step.
"use strict";

const RF = "/redfish/v1";
const REFRESH_MS = 1000;
let token = sessionStorage.getItem("strata-token") || "";
let timer = null;

const $ = (id) => document.getElementById(id);

function say(text, ok) {
	const m = $("message");
	m.textContent = text;
	m.className = ok ? "ok" : "";
	m.hidden = !text;
}

async function api(method, path, body) {
	const r = await fetch(RF + path, {
		method,
		headers: { "Authorization": "Bearer " + token, "Content-Type": "application/json" },
		body: body === undefined ? undefined : JSON.stringify(body),
	});
	const j = await r.json().catch(() => ({}));
	// Another control node's composer serves now (the mgmt leader
	// changed): go to its portal; sign in there again (the token is kept
	// per page address).
	const info = r.status === 503 && j.error && (j.error["@Message.ExtendedInfo"] || [])[0];
	if (info && info.MessageId === "Strata.1.0.NotServing" && info.MessageArgs &&
	    info.MessageArgs[0]) {
		location.assign("http://" + info.MessageArgs[0] + "/ui");
	}
	if (!r.ok) {
		const msg = (j.error && j.error.message) || ("HTTP " + r.status);
		const e = new Error(msg);
		e.status = r.status;
		throw e;
	}
	return j;
}

function human(n) {
	const u = ["B", "KiB", "MiB", "GiB", "TiB", "PiB"];
	let i = 0;
	while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
	return (i && n !== Math.floor(n) ? n.toFixed(1) : String(n)) + " " + u[i];
}

function cell(tr, text, cls) {
	const td = document.createElement("td");
	td.textContent = text;
	if (cls) td.className = cls;
	tr.appendChild(td);
	return td;
}

function bar(tr, used, total) {
	const td = document.createElement("td");
	const b = document.createElement("span");
	const f = document.createElement("span");
	b.className = "bar";
	f.style.width = (total ? Math.min(100, 100 * used / total) : 0) + "%";
	b.appendChild(f);
	td.appendChild(b);
	tr.appendChild(td);
}

function drawPools(inv) {
	const tb = $("pools").tBodies[0];
	const rows = [
		["GPUs", inv.Gpus.Total - inv.Gpus.Free, inv.Gpus.Total,
		 inv.Gpus.Free + " free of " + inv.Gpus.Total + " (" + inv.Gpus.Composed + " composed, " +
		 inv.Gpus.Failed + " failed, " + inv.Gpus.Unavailable + " unavailable)"],
		["Storage", inv.Storage.Used, inv.Storage.Total,
		 human(inv.Storage.Free) + " free of " + human(inv.Storage.Total)],
		["Memory", inv.Memory.Used, inv.Memory.Total,
		 human(inv.Memory.Free) + " free of " + human(inv.Memory.Total) + " on " +
		 inv.Memory.Nodes + " mem node(s)"],
	];
	tb.replaceChildren();
	for (const [name, used, total, text] of rows) {
		const tr = document.createElement("tr");
		tr.id = "pool-" + name.toLowerCase();
		cell(tr, name);
		bar(tr, used, total);
		cell(tr, text);
		tb.appendChild(tr);
	}
}

function drawSystems(all) {
	const tb = $("systems").tBodies[0];
	tb.replaceChildren();
	for (const s of all.slice().reverse()) {
		const o = s.Oem.Strata;
		const tr = document.createElement("tr");
		tr.id = "sys-" + s.Id;
		cell(tr, s.Id);
		cell(tr, s.Name);
		cell(tr, o.Tenant);
		cell(tr, o.State + (o.Reason ? ": " + o.Reason : ""), "state state-" + o.State);
		cell(tr, o.Gpus.map((g) => "gpu-" + g.Node + "-" + g.Index).join(", "));
		cell(tr, o.Volume ? o.Volume.Path + " (" + human(o.Volume.Size) + ")" : "");
		cell(tr, o.Memory ? human(o.Memory.Size) : "");
		const td = document.createElement("td");
		if (["Composed", "Degraded"].includes(o.State)) {
			const b = document.createElement("button");
			b.textContent = "Release";
			b.className = "release";
			b.dataset.id = s.Id;
			b.onclick = () => release(s.Id, b);
			td.appendChild(b);
		}
		tr.appendChild(td);
		tb.appendChild(tr);
	}
}

function drawUsage(u) {
	const tb = $("usage").tBodies[0];
	tb.replaceChildren();
	for (const t of u.Tenants) {
		const tr = document.createElement("tr");
		tr.id = "usage-" + t.Tenant;
		cell(tr, t.Tenant);
		cell(tr, t.GpuHours.toFixed(4), "num");
		cell(tr, t.StorageTBHours.toFixed(6), "num");
		cell(tr, t.MemoryGBHours.toFixed(4), "num");
		cell(tr, String(t.Compositions), "num");
		tb.appendChild(tr);
	}
}

async function refresh() {
	try {
		const [svc, sys, usage] = await Promise.all([
			api("GET", "/CompositionService"),
			api("GET", "/Systems"),
			api("GET", "/CompositionService/Oem/Strata/Usage"),
		]);
		drawPools(svc.Oem.Strata.Inventory);
		drawSystems(sys.Oem.Strata.Systems);
		drawUsage(usage);
		$("status").textContent = "signed in; updated " + new Date().toLocaleTimeString();
		document.body.dataset.ready = "1";
	} catch (e) {
		if (e.status === 401 || e.status === 403) {
			signOut("the token is refused: " + e.message);
			return;
		}
		say("cannot read the composer: " + e.message);
	}
}

async function release(id, button) {
	button.disabled = true;
	try {
		const s = await api("DELETE", "/Systems/" + encodeURIComponent(id));
		say(id + ": " + s.Oem.Strata.State, true);
	} catch (e) {
		say("cannot release " + id + ": " + e.message);
	}
	refresh();
}

async function compose(ev) {
	ev.preventDefault();
	const rq = {};
	const gpus = parseInt($("c-gpus").value || "0", 10);
	if (gpus) rq.Gpus = { Count: gpus };
	if ($("c-storage").value.trim()) rq.Storage = { Size: $("c-storage").value.trim() };
	if ($("c-memory").value.trim()) rq.Memory = { Size: $("c-memory").value.trim() };
	if ($("c-tenant").value.trim()) rq.Tenant = $("c-tenant").value.trim();
	if ($("c-name").value.trim()) rq.Name = $("c-name").value.trim();
	if ($("c-owner").value.trim()) rq.Owner = { Uid: parseInt($("c-owner").value, 10) };
	$("c-submit").disabled = true;
	try {
		const s = await api("POST", "/Systems", rq);
		$("credential-text").value = s.Oem.Strata.Credential || "";
		$("credential").hidden = !s.Oem.Strata.Credential;
		say(s.Id + ": " + s.Oem.Strata.State, true);
	} catch (e) {
		say("cannot compose: " + e.message);
	}
	$("c-submit").disabled = false;
	refresh();
}

function signIn(t) {
	token = t;
	sessionStorage.setItem("strata-token", t);
	$("login").hidden = true;
	$("app").hidden = false;
	$("signout").hidden = false;
	say("");
	refresh();
	clearInterval(timer);
	timer = setInterval(refresh, REFRESH_MS);
}

function signOut(why) {
	token = "";
	sessionStorage.removeItem("strata-token");
	clearInterval(timer);
	$("login").hidden = false;
	$("app").hidden = true;
	$("signout").hidden = true;
	$("status").textContent = why || "signed out";
	delete document.body.dataset.ready;
}

$("login-form").onsubmit = (ev) => {
	ev.preventDefault();
	signIn($("token").value.trim());
};
$("signout").onclick = () => signOut();
$("compose-form").onsubmit = compose;
if (token) signIn(token);

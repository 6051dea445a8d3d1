--[[
Strata's burst_buffer/lua script for Slurm 22.05 (docs/slurm.md).

A job asks for a Strata storage slice and pooled memory with one line:

    #BB_LUA strata pool=strata capacity=50G mem=16G dataset=/datasets/x

(pool= is Slurm's: burst_buffer/lua refuses a capacity= without it; it
must name the pool this script reports, "strata" unless strata_bb.conf
says otherwise). The stages:

  job_process  checks the line at submission; a bad one is refused with
               the reason, printed by sbatch.
  pools        reports the composer's storage pool (total and free), so
               Slurm holds a job while the pool cannot take it.
  setup        composes the slice and the memory ('strata compose create'),
               recording the composition and its credential under the
               state directory, keyed by job id.
  data_in      copies dataset= into the slice, inside the cluster, as the
               job's user (the composition's credential).
  pre_run      composes the GPUs Slurm gave the job (their GPU blocks).
  paths        gives the job STRATA_VOLUME, STRATA_TOKEN, STRATA_MGMT,
               STRATA_MEM_NS, STRATA_COMPOSITION (and STRATA_DATASET).
  data_out     copies the slice to STAGE_OUT/job-ID, inside the cluster,
               as the job's user.
  teardown     releases the composition ('strata compose delete'), after
               the job or when it is cancelled; also a composition whose
               id was never recorded (found by its name, slurm-job-ID).

The settings are in strata_bb.conf beside this file (written by 'strata
slurm install'). Every function runs as SlurmUser; job_process, pools and
paths inside slurmctld (they must be quick: job_process and paths only
read files), the others in slurmscriptd.
]]

local NAME = "strata burst_buffer.lua"

-- The compositions of a job: the slice (setup) and its GPUs (pre-run),
-- each recorded under the state directory and named slurm-job-ID(-gpus).
local COMP_KINDS = {
	{ state = "comp", suffix = "" },
	{ state = "gpucomp", suffix = "-gpus" },
}

-- ---- settings ----

local function script_dir()
	local src = debug.getinfo(1, "S").source or ""
	return src:match("^@(.*)/[^/]*$") or "."
end

local function load_conf()
	local conf = {
		strata = "/usr/bin/strata",
		mgmt = "",
		composer = "",
		token_file = "",
		state_dir = "/var/spool/slurm/strata",
		pool = "strata",
		granularity = "1048576",
		tenant = "user",	-- "user": the job's user name; "job": job-ID
		retain = "no",		-- "yes": volumes outlive their jobs
		setup_wait = "240",	-- seconds setup waits for room in the pools
		datasets = "",		-- dataset= reads under this prefix ("": none)
		results = "",		-- stage_out= writes under this prefix ("": none)
	}
	local path = script_dir() .. "/strata_bb.conf"
	local f = io.open(path, "r")
	if not f then
		return conf, "cannot read '" .. path .. "': run 'strata slurm install'"
	end
	local n = 0
	for line in f:lines() do
		n = n + 1
		local l = line:gsub("^%s+", ""):gsub("%s+$", "")
		if l ~= "" and l:sub(1, 1) ~= "#" then
			local k, v = l:match("^([%w_]+)%s*=%s*(.-)$")
			if not k or conf[k] == nil then
				f:close()
				return conf, string.format("%s line %d: '%s' is not a known key = value", path, n, l)
			end
			conf[k] = v
		end
	end
	f:close()
	return conf, nil
end

-- ---- the request ----

local UNITS = { [""] = 1, k = 2^10, m = 2^20, g = 2^30, t = 2^40, p = 2^50 }

-- Bytes of a size such as 50G, 512M, 1TiB, 4096; nil when it is not one.
-- Units are powers of 1024, as Slurm reads capacity=.
local function parse_size(s)
	local num, unit = s:match("^(%d+)(%a*)$")
	if not num or #num > 15 then
		return nil
	end
	unit = unit:lower()
	if unit:match("^[kmgtp]i?b$") then
		unit = unit:sub(1, 1)
	end
	local mult = UNITS[unit]
	if not mult then
		return nil
	end
	return tonumber(num) * mult
end

local KEYS = { pool = true, capacity = true, mem = true, dataset = true, stage_out = true }
-- The keys that name a path, the setting that bounds them, and why they
-- need a slice.
local PATH_KEYS = {
	{ key = "dataset", conf = "datasets", why = "the dataset is copied into the slice" },
	{ key = "stage_out", conf = "results", why = "the slice is what is staged out" },
}

--[[ Reads the job script's "#BB_LUA strata" line. Returns the request
{ storage = bytes, memory = bytes, dataset = path, stage_out = path } or nil and the reason
it is refused. As Slurm does, empty lines are skipped and the first other
line that is not a comment ends the directives. ]]
local function parse_request(job_script, conf)
	local f = io.open(job_script, "r")
	if not f then
		return nil, "cannot read the job script '" .. tostring(job_script) .. "'"
	end
	local text = f:read("*a")
	f:close()
	local found, req = nil, nil
	for line in (text .. "\n"):gmatch("([^\n]*)\n") do
		if line ~= "" and line:sub(1, 1) ~= "#" then
			break
		elseif line:match("^#BB_LUA") then
			local words = {}
			for w in line:sub(8):gmatch("%S+") do
				words[#words + 1] = w
			end
			if line:sub(8, 8):match("%S") then
				return nil, "'" .. line .. "': put a space after #BB_LUA"
			end
			if words[1] ~= "strata" then
				return nil, "'" .. line .. "': this cluster's #BB_LUA lines start with 'strata' (#BB_LUA strata pool=" ..
					conf.pool .. " capacity=SIZE mem=SIZE)"
			end
			if found then
				return nil, "more than one '#BB_LUA strata' line: give one, with every key"
			end
			found = line
			req = {}
			for i = 2, #words do
				local k, v = words[i]:match("^([%w_]+)=(.*)$")
				if not k then
					return nil, "'" .. words[i] .. "' is not key=value (keys: pool, capacity, mem, dataset, stage_out)"
				end
				if not KEYS[k] then
					return nil, "unknown key '" .. k .. "' (keys: pool, capacity, mem, dataset, stage_out)"
				end
				if req[k] then
					return nil, "'" .. k .. "=' is given twice"
				end
				if v == "" then
					return nil, "'" .. k .. "=' has no value"
				end
				req[k] = v
			end
		end
	end
	if not found then
		return nil, "no '#BB_LUA strata' line in the job script"
	end
	local out = { storage = 0, memory = 0 }
	for _, p in ipairs(PATH_KEYS) do
		local d = req[p.key]
		if d then
			local pre = conf[p.conf]
			if pre == "" then
				return nil, p.key .. "= is not enabled on this cluster (strata slurm install --" .. p.conf .. " PREFIX)"
			end
			if d:sub(1, #pre + 1) ~= pre .. "/" or #d == #pre + 1 or d:match("/%.%.?/") or d:match("/%.%.?$")
			    or d:match("//") or d:match("/$") or not d:match("^[%w._/+-]+$") then
				return nil, p.key .. "='" .. d .. "' is not a path under " .. pre .. "/ (letters, digits, . _ + - and /)"
			end
			if not req.capacity then
				return nil, p.key .. "= needs capacity=: " .. p.why
			end
			out[p.key] = d
		end
	end
	if req.capacity then
		out.storage = parse_size(req.capacity)
		if not out.storage or out.storage == 0 then
			return nil, "capacity='" .. req.capacity .. "' is not a size of 1 byte or more (such as 50G, 512M)"
		end
		if req.pool ~= conf.pool then
			return nil, "capacity= needs pool=" .. conf.pool .. " on the same line (Slurm accounts the capacity to that pool)"
		end
	elseif req.pool then
		return nil, "pool= without capacity=: say how much storage (capacity=50G)"
	end
	if req.mem then
		out.memory = parse_size(req.mem)
		if not out.memory or out.memory == 0 then
			return nil, "mem='" .. req.mem .. "' is not a size of 1 byte or more (such as 16G, 256M)"
		end
	end
	if out.storage == 0 and out.memory == 0 then
		return nil, "'#BB_LUA strata' asks for nothing: give capacity= (with pool=) or mem="
	end
	return out, nil
end

-- A size for people: 1 GiB, 256 MiB, 100 B.
local function human(n)
	local units = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" }
	local i = 1
	while n >= 1024 and i < #units do
		n = n / 1024
		i = i + 1
	end
	if i == 1 or n == math.floor(n) then
		return string.format("%d %s", n, units[i])
	end
	return string.format("%.1f %s", n, units[i])
end

-- ---- running strata ----

local function shquote(s)
	return "'" .. tostring(s):gsub("'", "'\\''") .. "'"
end

local function read_file(path)
	local f = io.open(path, "r")
	if not f then return nil end
	local t = f:read("*a")
	f:close()
	return t
end

local function write_file(path, text)
	local f, err = io.open(path, "w")
	if not f then return nil, err end
	f:write(text)
	f:close()
	return true
end

--[[ Runs 'strata ARGS' with the cluster and the credential of the
settings (or token_file: a job's own); returns ok, stdout, stderr. tag
names the capture files; limit, when given, is the seconds it may take
(coreutils' timeout kills it). ]]
local function strata(conf, tag, args, limit, token_file)
	local cmd = { shquote(conf.strata) }
	if limit then
		table.insert(cmd, 1, string.format("timeout -k 1 %d", limit))
	end
	for _, a in ipairs(args) do
		cmd[#cmd + 1] = shquote(a)
	end
	if conf.mgmt ~= "" then
		cmd[#cmd + 1] = "--mgmt " .. shquote(conf.mgmt)
	end
	if conf.composer ~= "" then
		cmd[#cmd + 1] = "--composer " .. shquote(conf.composer)
	end
	token_file = token_file or conf.token_file
	if token_file ~= "" then
		cmd[#cmd + 1] = "--token " .. shquote(token_file)
	end
	local out = conf.state_dir .. "/." .. tag .. ".out"
	local err = conf.state_dir .. "/." .. tag .. ".err"
	local rc = os.execute(table.concat(cmd, " ") .. " </dev/null >" .. shquote(out) .. " 2>" .. shquote(err))
	local o, e = read_file(out) or "", read_file(err) or ""
	os.remove(out)
	os.remove(err)
	return rc == 0, o, e
end

local function last_line(s)
	local l = ""
	for line in s:gmatch("[^\n]+") do
		if not line:match("^%s*$") then l = line end
	end
	return l
end

-- The string value of "key" in the JSON text (the first one), or nil.
local function json_str(text, key)
	return text:match('"' .. key .. '"%s*:%s*"([^"]*)"')
end

-- The integer value of "key" inside the object "obj", or nil.
local function json_obj_int(text, obj, key)
	local body = text:match('"' .. obj .. '"%s*:%s*(%b{})')
	return body and tonumber(body:match('"' .. key .. '"%s*:%s*(%d+)'))
end

local function state_path(conf, job_id, what)
	return string.format("%s/%s.%s", conf.state_dir, job_id, what)
end

local function user_name(uid)
	local p = io.popen("id -nu " .. shquote(uid) .. " 2>/dev/null")
	local name = p and p:read("*l")
	if p then p:close() end
	if name and name:match("^[%w._-]+$") then return name end
	return nil
end

-- ---- the Slurm entry points ----

function slurm_bb_job_process(job_script)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	local req, why = parse_request(job_script, conf)
	if not req then
		return slurm.ERROR, "strata: " .. why
	end
	-- Against the pools as slurm_bb_pools last read them.
	local inv = read_file(conf.state_dir .. "/inventory")
	local st, mt = inv and tonumber(inv:match("storage_total=(%d+)")), inv and tonumber(inv:match("memory_total=(%d+)"))
	if st and req.storage > st then
		return slurm.ERROR, string.format("strata: capacity= asks for %s, the Strata storage pool holds %s", human(req.storage), human(st))
	end
	if mt and req.memory > mt then
		return slurm.ERROR, string.format("strata: mem= asks for %s, the Strata memory pool holds %s", human(req.memory), human(mt))
	end
	return slurm.SUCCESS
end

function slurm_bb_pools()
	local conf, cerr = load_conf()
	if cerr then
		slurm.log_error("%s: %s", NAME, cerr)
		return slurm.ERROR, cerr
	end
	-- slurmctld waits for this, holding its locks: a composer that does
	-- not answer within 5 s is taken as away.
	local ok, out, err = strata(conf, "pools", { "compose", "inventory", "--json" }, 5)
	local total = ok and json_obj_int(out, "Storage", "Total")
	local free = ok and json_obj_int(out, "Storage", "Free")
	local mem = ok and json_obj_int(out, "Memory", "Total")
	if not total or not free then
		-- The composer away: the pool as last seen, so that jobs are
		-- still accepted; setup fails (and retries) until it is back.
		local inv = read_file(conf.state_dir .. "/inventory") or ""
		total = tonumber(inv:match("storage_total=(%d+)"))
		if not total then
			slurm.log_error("%s: cannot read the composer's inventory: %s", NAME, last_line(err))
			return slurm.ERROR, "strata: cannot read the composer's inventory"
		end
		free = 0
		slurm.log_error("%s: cannot read the composer's inventory (%s); the pool is reported full", NAME, last_line(err))
	else
		write_file(conf.state_dir .. "/inventory",
			string.format("storage_total=%d\nstorage_free=%d\nmemory_total=%d\n", total, free, mem or 0))
	end
	-- Slurm counts a pool in units of its granularity.
	local g = math.max(tonumber(conf.granularity) or 1, 1)
	return slurm.SUCCESS, string.format('{"pools":[{"id":"%s","quantity":%d,"granularity":%d,"free":%d}]}',
		conf.pool, math.floor(total / g), g, math.floor(math.min(free, total) / g))
end

function slurm_bb_setup(job_id, uid, gid, pool, bb_size, job_script)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	local req, why = parse_request(job_script, conf)
	if not req then
		return slurm.ERROR, "strata: " .. why
	end
	local tenant = conf.tenant == "user" and user_name(uid) or ("job-" .. job_id)
	local token = state_path(conf, job_id, "token")
	local args = { "compose", "create", "--tenant", tenant, "--name", "slurm-job-" .. job_id,
		"--token-out", token, "--json" }
	if req.storage > 0 then
		args[#args + 1] = "--storage"
		args[#args + 1] = string.format("%d", req.storage)
	end
	if req.memory > 0 then
		args[#args + 1] = "--memory"
		args[#args + 1] = string.format("%d", req.memory)
	end
	if conf.retain == "yes" then
		args[#args + 1] = "--retain"
	end
	-- The job's user owns the slice, and its credential acts as them:
	-- stage-in reads the dataset and stage-out writes the results as that
	-- user, so the namespace's permissions decide what a job may read and
	-- where it may write. (Root never gets here: burst_buffer/lua refuses
	-- root's jobs; the composer refuses root as an owner.)
	uid, gid = tonumber(uid), tonumber(gid)
	local owner = ""
	if uid and uid >= 1 and uid < 65534 then
		owner = string.format("%d:%d", uid, gid or uid)
		args[#args + 1] = "--owner"
		args[#args + 1] = owner
	end
	-- For pre-run, which composes the job's GPUs for the same owner.
	write_file(state_path(conf, job_id, "owner"), owner .. " " .. tenant .. "\n")
	if req.dataset then
		args[#args + 1] = "--path"
		args[#args + 1] = "r:" .. req.dataset
	end
	if req.stage_out then
		args[#args + 1] = "--path"
		args[#args + 1] = "rw:" .. req.stage_out
	end
	-- Memory is no Slurm pool (a job line accounts one), and the
	-- composer's free space is read every 30 s: a composition that does
	-- not fit now (HTTP 409) waits here, the job pending in stage-in,
	-- for up to setup_wait seconds (below burst_buffer.conf's
	-- StageInTimeout). A setup that fails is held by Slurm.
	local deadline = os.time() + (tonumber(conf.setup_wait) or 0)
	local ok, out, err
	while true do
		ok, out, err = strata(conf, "setup-" .. job_id, args)
		if ok or not err:match("%(HTTP 409%)") or os.time() >= deadline then
			break
		end
		os.execute("sleep 2")
	end
	local id = json_str(out, "Id")
	if id then
		write_file(state_path(conf, job_id, "comp"), id .. "\n")
	end
	if not ok or not id then
		slurm.log_error("%s: job %s: compose create failed: %s", NAME, job_id, err)
		return slurm.ERROR, last_line(err)
	end
	local env = { "STRATA_COMPOSITION=" .. id,
		"STRATA_MGMT=" .. (json_str(out:match('"Addresses"%s*:%s*(%b{})') or "", "Mgmt") or conf.mgmt) }
	local vol = out:match('"Volume"%s*:%s*(%b{})')
	if vol then env[#env + 1] = "STRATA_VOLUME=" .. json_str(vol, "Path") end
	local mem = out:match('"Memory"%s*:%s*(%b{})')
	if mem then env[#env + 1] = "STRATA_MEM_NS=" .. json_str(mem, "Namespace") end
	write_file(state_path(conf, job_id, "env"), table.concat(env, "\n") .. "\n")
	slurm.log_info("%s: job %s: composition %s for tenant %s", NAME, job_id, id, tenant)
	return slurm.SUCCESS
end

--[[ Stage-in and stage-out: a copy inside the cluster ('strata cp -r -j 8')
between the job's volume and the request's key (dataset or stage_out),
with the job's own credential, so as the job's user. dir "in" copies
PATH into VOLUME/NAME, "out" the volume to PATH/job-ID. Returns
slurm.SUCCESS (and conf, env, the destination when it copied), or
slurm.ERROR and the reason. ]]
local function stage(job_id, job_script, key, dir)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	local req, why = parse_request(job_script, conf)
	if not req then
		return slurm.ERROR, "strata: " .. why
	end
	local path = req[key]
	if not path then
		return slurm.SUCCESS
	end
	local label = dir == "in" and "stage-in of " .. path or "stage-out to " .. path
	local env = read_file(state_path(conf, job_id, "env")) or ""
	local vol = env:match("STRATA_VOLUME=([^\n]+)")
	if not vol then
		return slurm.ERROR, "strata: job " .. job_id .. " has no volume for the " .. label
	end
	local src, dest = path, vol .. "/" .. path:match("([^/]+)$")
	if dir == "out" then
		src, dest = vol, path .. "/job-" .. job_id
	end
	local ok, _, err = strata(conf, "stage" .. dir .. "-" .. job_id, { "cp", "-r", "-j", "8", src, dest },
		nil, state_path(conf, job_id, "token"))
	if not ok then
		slurm.log_error("%s: job %s: %s failed: %s", NAME, job_id, label, err)
		return slurm.ERROR, "strata: " .. label .. ": " .. last_line(err)
	end
	slurm.log_info("%s: job %s: %s staged %s to %s", NAME, job_id, src, dir, dest)
	return slurm.SUCCESS, conf, env, dest
end

-- Stage-in: dataset= is copied into the slice (as the job's user), and
-- the job is told where: STRATA_DATASET.
function slurm_bb_data_in(job_id, job_script)
	local rc, conf, env, dest = stage(job_id, job_script, "dataset", "in")
	if rc ~= slurm.SUCCESS then
		return rc, conf		-- conf: the reason
	end
	if dest then
		write_file(state_path(conf, job_id, "env"), env .. "STRATA_DATASET=" .. dest .. "\n")
	end
	return slurm.SUCCESS
end

function slurm_bb_real_size(job_id)
	return slurm.SUCCESS
end

function slurm_bb_paths(job_id, job_script, path_file)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	local env = read_file(state_path(conf, job_id, "env"))
	local token = read_file(state_path(conf, job_id, "token"))
	if not env or not token then
		return slurm.ERROR, "strata: job " .. job_id .. " has no composition recorded in " .. conf.state_dir
	end
	local f, err = io.open(path_file, "w")
	if not f then
		return slurm.ERROR, "strata: cannot write '" .. path_file .. "': " .. tostring(err)
	end
	f:write(env)
	f:write("STRATA_TOKEN=" .. token:gsub("%s+$", "") .. "\n")
	f:close()
	return slurm.SUCCESS
end

-- Slurm's node names to Strata's compute nodes: the lines 'strata slurm
-- gres' writes into gres.conf beside this script ("# strata node N at
-- ADDR; slurm.conf: NodeName=NAME ..."). Empty without one.
local function gres_nodes()
	local map = {}
	local text = read_file(script_dir() .. "/gres.conf") or ""
	for node, name in text:gmatch("# strata node (%d+) at %S+; slurm%.conf: NodeName=([%w._-]+)") do
		map[name] = node
	end
	return map
end

-- "0-1,3" -> { 0, 1, 3 }, or nil.
local function expand_idx(s)
	local out = {}
	for part in s:gmatch("[^,]+") do
		local a, b = part:match("^(%d+)%-(%d+)$")
		a, b = tonumber(a or part:match("^(%d+)$")), tonumber(b or a or part:match("^(%d+)$"))
		if not a or not b or b < a or b - a > 64 then return nil end
		for i = a, b do out[#out + 1] = i end
	end
	return out
end

-- Slurm's hostlist, expanded: comma-separated items, each NAME or
-- PREFIX[RANGES]SUFFIX, RANGES a comma list of N or N-M (zero padding
-- kept: n[01-10]), one bracket per item; "n[1-3,5],gpu7" is n1, n2, n3,
-- n5, gpu7 (what 'scontrol show job -d' prints for the nodes of one
-- allocation). -> the names, or nil and why.
local function expand_hostlist(s)
	local out, pos = {}, 1
	if s == "" then
		return nil, "an empty hostlist"
	end
	while pos <= #s do
		local item = s:match("^[^,%[]*%b[][^,%[]*", pos) or s:match("^[^,%[%]]*", pos)
		local nxt = s:sub(pos + #item, pos + #item)
		if item == "" or (nxt ~= "," and nxt ~= "") then
			return nil, "'" .. s:sub(pos) .. "' is not NAME or PREFIX[RANGES]SUFFIX (one bracket per name)"
		end
		local pre, ranges, suf = item:match("^([^%[%]]*)%[([^%[%]]*)%]([^%[%]]*)$")
		if not pre then
			if item:find("[%[%]]") then
				return nil, "'" .. item .. "' is not NAME or PREFIX[RANGES]SUFFIX (one bracket per name)"
			end
			out[#out + 1] = item
		else
			local bad = "'" .. item .. "': '" .. ranges ..
				"' is not N or N-M with N <= M, comma-separated (such as n[1-3,5])"
			if ranges == "" or ranges:sub(-1) == "," then
				return nil, bad
			end
			for part in (ranges .. ","):gmatch("([^,]*),") do
				local a, b = part:match("^(%d+)%-(%d+)$")
				a = a or part:match("^(%d+)$")
				b = b or a
				local lo, hi = tonumber(a), tonumber(b)
				if not lo or hi < lo or #b > 9 then
					return nil, bad
				end
				if #out + hi - lo >= 4096 then
					return nil, "'" .. s .. "' names more than 4096 nodes"
				end
				local width = (a:sub(1, 1) == "0" and #a > 1) and #a or 0
				for i = lo, hi do
					out[#out + 1] = pre .. string.format("%0" .. width .. "d", i) .. suf
				end
			end
		end
		pos = pos + #item + 1
		if nxt == "," and pos > #s then
			return nil, "'" .. s .. "' ends with ','"
		end
	end
	return out
end

-- Pre-run, once Slurm has placed the job: the GPUs it gave the job (GRES
-- gpu with their indices, 'scontrol show job -d') become a composition of
-- those GPU blocks (slurm-job-ID-gpus, the job's user its owner), so the
-- composer's inventory shows them composed while the job runs, and
-- another composition cannot take them. Without gres.conf lines of
-- 'strata slurm gres', nothing to bind. A GPU the composer holds for
-- something else fails the job's pre-run, with the composer's reason.
function slurm_bb_pre_run(job_id, job_script)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	local map = gres_nodes()
	if next(map) == nil then
		return slurm.SUCCESS
	end
	local p = io.popen("scontrol show job -d " .. shquote(job_id) .. " 2>&1")
	local text = p and p:read("*a") or ""
	if p then p:close() end
	local ids = {}
	for nodes, idx in text:gmatch("Nodes=(%S+)%s+CPU_IDs=%S+%s+Mem=%S+%s+GRES=gpu[^%(%s]*%(IDX:([%d,%-]+)%)") do
		-- One line for the nodes of one allocation: a hostlist (n[1-2]).
		local names, herr = expand_hostlist(nodes)
		local list = expand_idx(idx)
		local why = herr or (not list and "IDX " .. idx .. " is not a list of GPU indices")
		for _, name in ipairs(names or {}) do
			if not why and not map[name] then
				why = "node '" .. name .. "' is not one of gres.conf's strata nodes"
			end
		end
		if why then
			slurm.log_error("%s: job %s: cannot bind GPUs of nodes '%s' (IDX %s): %s",
				NAME, job_id, nodes, idx, why)
			return slurm.ERROR, "strata: cannot bind the GPUs of nodes " .. nodes .. ": " .. why
		end
		for _, name in ipairs(names) do
			for _, i in ipairs(list) do
				ids[#ids + 1] = string.format("gpu-%s-%d", map[name], i)
			end
		end
	end
	if #ids == 0 then
		return slurm.SUCCESS
	end
	local owner = read_file(state_path(conf, job_id, "owner")) or ""
	local args = { "compose", "create", "--gpu-ids", table.concat(ids, ","), "--name",
		"slurm-job-" .. job_id .. "-gpus", "--json" }
	local uidgid, tenant = owner:match("^(%S*) (%S+)")
	if uidgid and uidgid ~= "" then
		args[#args + 1] = "--owner"
		args[#args + 1] = uidgid
	end
	if tenant then
		args[#args + 1] = "--tenant"
		args[#args + 1] = tenant
	end
	local ok, out, err = strata(conf, "gpus-" .. job_id, args)
	local id = json_str(out, "Id")
	if id then
		write_file(state_path(conf, job_id, "gpucomp"), id .. "\n")
	end
	if not ok or not id then
		slurm.log_error("%s: job %s: cannot compose its GPUs %s: %s", NAME, job_id,
			table.concat(ids, ","), err)
		return slurm.ERROR, "strata: GPUs " .. table.concat(ids, ",") .. ": " .. last_line(err)
	end
	slurm.log_info("%s: job %s: GPUs %s composed as %s", NAME, job_id, table.concat(ids, ","), id)
	return slurm.SUCCESS
end

function slurm_bb_post_run(job_id, job_script)
	return slurm.SUCCESS
end

-- Stage-out: the slice is copied to STAGE_OUT/job-ID (as the job's user),
-- after the job and before teardown releases the slice. stage_out= names
-- a directory that exists and that the user may write (the credential
-- reaches it, not its parent, so it cannot make it). A failure is the
-- job's stage-out failure: Slurm holds the teardown, so the slice is
-- still there to copy again.
function slurm_bb_data_out(job_id, job_script)
	local rc, why = stage(job_id, job_script, "stage_out", "out")
	if rc ~= slurm.SUCCESS then
		return rc, why
	end
	return slurm.SUCCESS
end

-- The composition of job_id: as setup recorded it, else by its name (a
-- setup that composed and died before recording), else nil. kind: one of
-- COMP_KINDS.
local function find_comp(conf, job_id, kind)
	local rec = read_file(state_path(conf, job_id, kind.state))
	if rec and rec:match("^[%w._-]+") then
		return rec:match("^[%w._-]+"), nil
	end
	local ok, out, err = strata(conf, "list-" .. job_id, { "compose", "list", "--json" })
	if not ok then
		return nil, last_line(err)
	end
	local want = "slurm-job-" .. job_id .. kind.suffix
	for sys in out:gmatch('"Id"%s*:%s*"([^"]*)"%s*,%s*"Name"%s*:%s*"' .. want:gsub("%-", "%%-") .. '"') do
		return sys, nil
	end
	return nil, nil
end

function slurm_bb_job_teardown(job_id, job_script, hurry)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, "strata: " .. cerr
	end
	for _, kind in ipairs(COMP_KINDS) do
		local id, ferr = find_comp(conf, job_id, kind)
		if ferr then
			slurm.log_error("%s: job %s: cannot list the compositions: %s", NAME, job_id, ferr)
			return slurm.ERROR, "strata: " .. ferr
		end
		if id then
			local ok, _, err = strata(conf, "teardown-" .. job_id, { "compose", "delete", id })
			-- Gone already (a teardown retried, an operator's delete): done.
			if not ok and not err:match("no composition") and not err:match("is already") then
				slurm.log_error("%s: job %s: cannot release %s: %s", NAME, job_id, id, err)
				return slurm.ERROR, "strata: cannot release " .. id .. ": " .. last_line(err)
			end
			slurm.log_info("%s: job %s: composition %s released", NAME, job_id, id)
		end
	end
	for _, what in ipairs({ "comp", "gpucomp", "owner", "env", "token" }) do
		os.remove(state_path(conf, job_id, what))
	end
	return slurm.SUCCESS
end

function slurm_bb_get_status(...)
	local conf, cerr = load_conf()
	if cerr then
		return slurm.ERROR, cerr
	end
	local ok, out, err = strata(conf, "status", { "compose", "inventory" })
	return ok and slurm.SUCCESS or slurm.ERROR, ok and out or err
end

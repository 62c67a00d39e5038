-- wrk script of tests/bench/resources.sh: one operation on a random resource of N per request.
--   wrk ... -s load.lua URL -- OP PREFIX N [RUN]
-- OP: produce (POST /topics/<PREFIX><i>/messages, one message, a new key), patch (PATCH
-- /topics/<PREFIX><i>/keys/<new key>/head), enqueue (POST /queues/<PREFIX><i>/jobs), claim (POST
-- /queues/<PREFIX><i>/leases, max_jobs 1, no wait). <i> is drawn uniformly from 1..N for every
-- request (N 1: always the same resource). Keys are k<RUN>-<thread>-<counter>: new in every
-- request as long as every wrk run is given a RUN of its own (a PATCH of a key an earlier run
-- created would change nothing, produce nothing, and measure a no-op).
local next_id = 1

function setup(thread)
    thread:set("id", next_id)
    next_id = next_id + 1
end

function init(args)
    op, prefix, n, run = args[1], args[2], tonumber(args[3] or "1"), args[4] or "0"
    if op == nil or prefix == nil then
        error("usage: wrk ... -s load.lua URL -- OP PREFIX N")
    end
    math.randomseed(os.time() * 100 + id)
    json = {["Content-Type"] = "application/json"}
    merge = {["Content-Type"] = "application/merge-patch+json"}
    counter = 0
end

function request()
    counter = counter + 1
    local r = prefix .. math.random(n)
    if op == "produce" then
        return wrk.format("POST", "/topics/" .. r .. "/messages", json,
                          string.format('{"key":"k%s-%d-%d","value":{"n":%d}}', run, id, counter, counter))
    elseif op == "patch" then
        return wrk.format("PATCH", string.format("/topics/%s/keys/k%s-%d-%d/head", r, run, id, counter),
                          merge, '{"f":1}')
    elseif op == "enqueue" then
        return wrk.format("POST", "/queues/" .. r .. "/jobs", json,
                          string.format('{"payload":{"n":%d}}', counter))
    elseif op == "claim" then
        return wrk.format("POST", "/queues/" .. r .. "/leases", json,
                          string.format('{"owner":"w%d","max_jobs":1,"wait_seconds":0}', id))
    end
    error("unknown op " .. op)
end

done = function(summary, latency, requests)
    io.write(string.format("NON2XX %d\n", summary.errors.status))
end

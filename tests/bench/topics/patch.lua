-- wrk script of tests/bench/topics.sh: locked read-modify-write, PATCH
-- /topics/{topic}/keys/{key}/head with application/merge-patch+json.
--   wrk ... -s patch.lua http://127.0.0.1:PORT -- TOPIC distinct|hot
-- distinct: a new key per request (k<t>-<n>: wrk thread <t>, its request counter <n>), patch
--   {"f":1}; each request creates the key's row (locked read, headless insert) and produces.
-- hot: every request patches the key "hot" with {"f":"<t>-<n>"}, a value no other request
--   sends, so that every PATCH changes the value and produces a message (a patch that changes
--   nothing produces none).
local next_id = 1

function setup(thread)
    thread:set("id", next_id)
    next_id = next_id + 1
end

function init(args)
    if args[1] == nil or (args[2] ~= "distinct" and args[2] ~= "hot") then
        error("usage: wrk ... -s patch.lua URL -- TOPIC distinct|hot")
    end
    prefix = "/topics/" .. args[1] .. "/keys/"
    hot = args[2] == "hot"
    headers = {["Content-Type"] = "application/merge-patch+json"}
    counter = 0
end

function request()
    counter = counter + 1
    if hot then
        return wrk.format("PATCH", prefix .. "hot/head", headers,
                          string.format('{"f":"%d-%d"}', id, counter))
    end
    return wrk.format("PATCH", prefix .. string.format("k%d-%d", id, counter) .. "/head", headers,
                      '{"f":1}')
end

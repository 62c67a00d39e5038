-- wrk script of tests/bench/topics.sh: compacted produce, POST /topics/{topic}/messages.
--   wrk ... -s produce.lua http://127.0.0.1:PORT -- TOPIC [BATCH]
-- BATCH 1 (the default) sends one message per request, {"key":"k<t>-<n>","value":{"n":<n>}};
-- a larger BATCH sends {"messages":[...]} with that many messages, keys k<t>-<n>-<i>. <t> is the
-- wrk thread (1..), <n> its request counter: every key is new, in every thread.
local next_id = 1

function setup(thread)
    thread:set("id", next_id)
    next_id = next_id + 1
end

function init(args)
    if args[1] == nil then
        error("usage: wrk ... -s produce.lua URL -- TOPIC [BATCH]")
    end
    path = "/topics/" .. args[1] .. "/messages"
    batch = tonumber(args[2] or "1")
    headers = {["Content-Type"] = "application/json"}
    counter = 0
end

function request()
    counter = counter + 1
    local body
    if batch == 1 then
        body = string.format('{"key":"k%d-%d","value":{"n":%d}}', id, counter, counter)
    else
        local parts = {}
        for i = 1, batch do
            parts[i] = string.format('{"key":"k%d-%d-%d","value":{"n":%d}}', id, counter, i,
                                     counter)
        end
        body = '{"messages":[' .. table.concat(parts, ",") .. ']}'
    end
    return wrk.format("POST", path, headers, body)
end

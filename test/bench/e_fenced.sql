\set id random(1, :rows)
SELECT fencing.fenced_update('b_fenced', jsonb_build_object('id', :id::int), :token, jsonb_build_object('v', :id::int));

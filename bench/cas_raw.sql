-- The ceiling for cas_transitions_per_s: the same work as one observation applied by
-- notify.transitions.record_observation, as raw SQL run by pgbench on the same tables:
-- insert an observation, conditional update of the event (compare-and-set on version),
-- insert the transition row. Each client works on its own slice of events, as each
-- project worker does, so neither side measures contention on one row.
\set n :client_id * :per_client + random(1, :per_client)
BEGIN;
INSERT INTO notify_observation (event_id, channel, source, raw_status, normalized, provider_time, recorded_at, effect, actor, note, raw_payload, dedup_key)
  VALUES ('evt_pgbench_' || :n, 'sms', 'callback', 'sent', 'pending', NULL, now(), 'applied', 'pgbench', '', '', '');
UPDATE notify_event
  SET version = version + 1, state_entered_at = now(), last_observation_at = now(), next_action_at = now() + interval '10 seconds'
  WHERE id = 'evt_pgbench_' || :n AND version = (SELECT version FROM notify_event WHERE id = 'evt_pgbench_' || :n);
INSERT INTO notify_transition (event_id, from_state, to_state, version, cause, actor, at, observation_id)
  SELECT id, 'sms_pending', 'sms_pending', version, 'observation', 'pgbench', now(), NULL
  FROM notify_event WHERE id = 'evt_pgbench_' || :n;
END;

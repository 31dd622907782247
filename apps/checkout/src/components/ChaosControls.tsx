'use client';

import { type Chaos, chaosToSearch } from '@/client/chaos';
import { useChaos } from './Providers';

const sliders = [
  { name: 'dropRepliesPercent', label: 'Drop replies', unit: '%', max: 100, step: 10 },
  { name: 'failBeforeSendPercent', label: 'Fail before sending', unit: '%', max: 100, step: 10 },
  { name: 'latencyMs', label: 'Added latency', unit: 'ms', max: 2000, step: 100 },
] as const;

const toggles = [
  {
    name: 'crashAfterCharge',
    label: 'Crash after charge',
    hint: 'the server dies once the card is charged, before the order exists',
  },
  { name: 'doubleClick', label: 'Double click', hint: 'Pay sends the request twice at once' },
  {
    name: 'redeliverEvent',
    label: 'Redeliver the event',
    hint: 'order.paid reaches the email consumer twice',
  },
] as const;

/** The chaos switches; also settable in the URL, e.g. ?drop=50&crash=1. */
export function ChaosControls() {
  const { chaos, setChaos } = useChaos();
  const set = <TName extends keyof Chaos>(name: TName, value: Chaos[TName]) =>
    setChaos({ ...chaos, [name]: value });
  return (
    <div className="card chaos" data-testid="chaos">
      <h2>Chaos</h2>
      {sliders.map((slider) => (
        <label className="slider" key={slider.name}>
          <span>{slider.label}</span>
          <input
            type="range"
            min={0}
            max={slider.max}
            step={slider.step}
            value={chaos[slider.name]}
            onChange={(event) => set(slider.name, Number(event.target.value))}
          />
          <output>
            {chaos[slider.name]} {slider.unit}
          </output>
        </label>
      ))}
      {toggles.map((toggle) => (
        <label className="toggle" key={toggle.name}>
          <input
            type="checkbox"
            checked={chaos[toggle.name]}
            onChange={(event) => set(toggle.name, event.target.checked)}
          />
          <span>
            {toggle.label} <span className="hint">— {toggle.hint}</span>
          </span>
        </label>
      ))}
      <div className="share">
        This setup as a link: <code>/checkout{chaosToSearch(chaos) || ' (no chaos)'}</code>
      </div>
    </div>
  );
}

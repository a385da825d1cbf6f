import assert from 'node:assert/strict';
import { test } from 'node:test';

import { markedTitle } from '../status/title';

test('the page title says how many questions wait, once', () => {
  assert.equal(markedTitle('agent.ipynb - JupyterLab', 2), '(2 waiting) agent.ipynb - JupyterLab');
  assert.equal(markedTitle('(2 waiting) agent.ipynb - JupyterLab', 1), '(1 waiting) agent.ipynb - JupyterLab');
});

test('the marker goes when nothing waits', () => {
  assert.equal(markedTitle('(3 waiting) agent.ipynb - JupyterLab', 0), 'agent.ipynb - JupyterLab');
  assert.equal(markedTitle('agent.ipynb - JupyterLab', 0), 'agent.ipynb - JupyterLab');
});

/**
 * Calls to the server's approvals API (iac_kernel/server/approvals.py) through
 * JupyterLab's ServerConnection: it sends the page's credentials (token or login cookie,
 * the XSRF header; under JupyterHub the hub's OAuth cookie). Who approves is never sent:
 * the server knows who is logged in.
 */

import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { API_PATH, IApproval, IListing, errorLine, parseApproval, parseListing } from './model';

/** A refused or failed call; the message is the server's one line. */
export class ApprovalsError extends Error {}

export class ApprovalsApi {
  constructor(private _settings: ServerConnection.ISettings = ServerConnection.makeSettings()) {}

  /** The pending records. */
  async list(): Promise<IListing> {
    return parseListing(await this._call('GET', ''));
  }

  /** One record, with the plan card it was asked on (`withCard`), or without. */
  async get(id: string, withCard = true): Promise<IApproval> {
    return this._record(
      await this._call('GET', encodeURIComponent(id), undefined, withCard ? '' : '?card=0')
    );
  }

  /** Approve (the record must still be for `planSha256`: the plan shown) or reject. */
  async decide(
    id: string,
    decision: 'approve' | 'reject',
    note: string,
    planSha256: string
  ): Promise<IApproval> {
    const body: Record<string, string> = { note };
    if (decision === 'approve') {
      body.plan_sha256 = planSha256;
    }
    return this._record(
      await this._call('POST', `${encodeURIComponent(id)}/${decision}`, body)
    );
  }

  private _record(raw: unknown): IApproval {
    const record = parseApproval((raw as { approval?: unknown } | null)?.approval);
    if (!record) {
      throw new ApprovalsError('the server sent no readable approval record');
    }
    return record;
  }

  private async _call(
    method: string,
    path: string,
    body?: unknown,
    query = ''
  ): Promise<unknown> {
    const base = URLExt.join(this._settings.baseUrl, API_PATH);
    const url = (path ? URLExt.join(base, path) : base) + query;
    const init: RequestInit = { method };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
      init.headers = { 'Content-Type': 'application/json' };
    }
    let response: Response;
    try {
      response = await ServerConnection.makeRequest(url, init, this._settings);
    } catch (error) {
      throw new ApprovalsError(`the server could not be reached (${String(error)})`);
    }
    let data: unknown = null;
    try {
      data = await response.json();
    } catch {
      data = null;
    }
    if (!response.ok) {
      throw new ApprovalsError(errorLine(response.status, data));
    }
    return data;
  }
}
